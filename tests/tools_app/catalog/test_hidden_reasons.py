"""The catalog says, for every tool it leaves out, the rule that left it out: the explainer
shows these sentences, so they are the catalog's own decisions and never a second opinion."""
import pytest

from tools_app.catalog.catalog import CatalogInputs, HostSwitches, PermissionRule, assemble_catalog
from tools_app.catalog.clients import client_tool_entries
from tools_app.catalog.registry import Binding, Tool

ON = HostSwitches(session_tools=True)


def snapshot(tools=(), switches=ON, clients=(), **kwargs):
    entries = client_tool_entries(clients)
    return assemble_catalog(CatalogInputs(
        switches=switches, provider=kwargs.pop("provider", "echo"), tools=tuple(tools),
        client_tools=tuple(e for e in entries if isinstance(e, Binding)),
        invalid_tools=tuple(e for e in entries if not isinstance(e, Binding)), **kwargs))


def reasons(snap):
    return {hidden.name: hidden.reason for hidden in snap.hidden}


@pytest.mark.parametrize("switches, tools, kwargs, sentence", [
    (ON, [Tool("deploy", advanced_permission=True)], {},
     "deploy needs advanced permission, and advancedTools is off for this tenant."),
    (HostSwitches(session_tools=False), [Tool("list_sessions", group="session")], {},
     "list_sessions is a session tool, and sessionTools is off for this tenant."),
    (HostSwitches(session_tools_providers=("claude",)), [Tool("list_sessions", group="session")], {},
     "list_sessions is a session tool, and sessionToolsProviders does not include this session's provider echo."),
    (ON, [Tool("new_chat", availability="userChats")], {"chat_origin_kind": "tool"},
     "new_chat is only offered in chats a person started, and this chat was started by a tool."),
    (ON, [Tool("per_chat", is_enabled_for_session=lambda session: False)], {},
     "per_chat is not enabled for this session: its isEnabledForSession check said no."),
    (HostSwitches(without_host_tools=("echo",)), [Tool("list_sessions", group="session")], {},
     "list_sessions is one of the host's own tools, and plugins.echo.hostTools is false for this tenant."),
    (ON, [Tool("lint"), Tool("grep")], {"allowlist": ("grep",)},
     "lint is not among the tools the session's agent definition allows."),
    (ON, [Tool("shell")], {"permission_rules": (PermissionRule("shell", "deny"),)},
     "The agent's permission rules deny shell on every resource, so shell is left out."),
])
def test_each_rule_that_hides_a_tool_says_so_in_a_sentence(switches, tools, kwargs, sentence):
    snap = snapshot(tools, switches, **kwargs)
    assert sentence in reasons(snap).values()
    hidden_name = next(h.name for h in snap.hidden if h.reason == sentence)
    assert hidden_name not in snap.names


def test_an_invalid_client_tool_is_hidden_with_its_problem():
    snap = snapshot(clients=[{"clientId": "ide", "tools": [{"name": "has space"}, {"name": "fine"}]}])
    assert snap.names == ["ide__fine"]
    assert [(h.name, h.source, h.reason) for h in snap.hidden] == [
        ("ide__has space", "client",
         "ide__has space was left out because its definition is invalid: 'has space' is not a valid tool name.")]


def test_every_tool_is_either_offered_or_hidden_and_never_both():
    tools = [Tool("deploy", advanced_permission=True), Tool("list_sessions", group="session"), Tool("lint"),
             Tool("issues", source="mcp"), Tool("computer", source="plugin", advanced_permission=True)]
    clients = [{"clientId": "ide", "tools": [{"name": "pick"}]}]
    for switches in (ON, HostSwitches(session_tools=False, advanced_tools=True)):
        snap = snapshot(tools, switches, clients=clients)
        hidden = [h.name for h in snap.hidden]
        assert sorted(snap.names + hidden) == sorted(["deploy", "list_sessions", "lint", "issues", "computer",
                                                      "ide__pick"])
        assert not set(snap.names) & set(hidden)


def test_ticking_advanced_tools_moves_the_tool_from_hidden_to_offered():
    tools = [Tool("computer", source="plugin", advanced_permission=True)]
    assert [(h.name, h.source, h.rule) for h in snapshot(tools).hidden] == [("computer", "plugin", "advanced")]
    offered = snapshot(tools, HostSwitches(advanced_tools=True))
    assert offered.names == ["computer"] and offered.hidden == ()


def test_a_plugin_without_the_hosts_tools_keeps_plugin_mcp_and_client_tools():
    tools = [Tool("list_sessions", group="session"), Tool("ahp_resource"), Tool("deploy", source="plugin"),
             Tool("issues", source="mcp")]
    clients = [{"clientId": "ide", "tools": [{"name": "pick"}]}]
    off = snapshot(tools, HostSwitches(without_host_tools=("echo",)), clients=clients)
    assert off.names == ["deploy", "ide__pick", "issues"]
    assert [d["name"] for d in off.server_tools] == ["deploy"]
    other_provider = snapshot(tools, HostSwitches(without_host_tools=("claude",)), clients=clients)
    assert other_provider.names == ["list_sessions", "ahp_resource", "deploy", "ide__pick", "issues"]
