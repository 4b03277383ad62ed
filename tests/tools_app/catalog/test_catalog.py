import logging
from types import SimpleNamespace

import pytest

from tools_app.catalog.bounding import bound_output
from tools_app.catalog.catalog import (
    Caller,
    CatalogInputs,
    HostSwitches,
    PermissionRule,
    assemble_catalog,
    sessionless_tools,
)
from tools_app.catalog.clients import client_tools
from tools_app.catalog.registry import Tool
from tools_app.catalog.validation import ToolRefusal

ON = HostSwitches(session_tools=True)


def catalog(tools=(), switches=ON, active_clients=(), **kwargs):
    kwargs.setdefault("provider", "echo")
    return assemble_catalog(CatalogInputs(
        switches=switches, tools=tuple(tools), client_tools=client_tools(active_clients), **kwargs
    ))


def session_tool(name="list_sessions"):
    return Tool(name, group="session")


def client(client_id, *tool_defs):
    return {"clientId": client_id, "tools": list(tool_defs)}


def test_sources_come_in_order_host_and_plugin_then_client_then_mcp():
    snapshot = catalog(
        [Tool("gh_issues", source="mcp"), Tool("host_a"), Tool("plug_b", source="plugin")],
        active_clients=(client("ide", {"name": "open_file"}),),
    )
    assert snapshot.names == ["host_a", "plug_b", "ide__open_file", "gh_issues"]
    assert [d["name"] for d in snapshot.server_tools] == ["host_a", "plug_b"]


def test_a_client_tool_is_bound_to_its_client_under_the_name_it_announced():
    snapshot = catalog(active_clients=(client("ide", {"name": "open_file", "description": "Open"}),))
    binding = snapshot.bind("ide__open_file")
    assert (binding.client_id, binding.client_tool_name) == ("ide", "open_file")


def test_a_client_with_no_id_or_a_bad_tool_name_is_dropped_and_logged(caplog):
    with caplog.at_level(logging.WARNING):
        snapshot = catalog(active_clients=(
            {"tools": [{"name": "orphan"}]},
            client("ide", {"name": "has space"}, {"name": "dotted.name"}, {"name": "fine"}),
        ))
    assert snapshot.names == ["ide__fine"]
    assert "no clientId" in caplog.text and "'has space'" in caplog.text


def test_advanced_permission_tools_need_advanced_tools_on():
    tools = [Tool("danger", advanced_permission=True), Tool("safe")]
    assert catalog(tools).names == ["safe"]
    assert catalog(tools, HostSwitches(advanced_tools=True)).names == ["danger", "safe"]


@pytest.mark.parametrize("switches,provider,offered", [
    (HostSwitches(session_tools=True), "echo", True),
    (HostSwitches(session_tools=False), "echo", False),
    (HostSwitches(session_tools=True, session_tools_providers=("echo",)), "echo", True),
    (HostSwitches(session_tools=True, session_tools_providers=("copilot",)), "echo", False),
    (HostSwitches(session_tools=False, session_tools_providers=("echo",)), "echo", False),
])
def test_session_tools_follow_session_tools_and_its_providers(switches, provider, offered):
    snapshot = catalog([session_tool(), Tool("schedule_wakeup")], switches, provider=provider)
    assert ("list_sessions" in snapshot.names) is offered
    assert "schedule_wakeup" in snapshot.names  # host tools outside the group are always offered


def test_is_enabled_for_session_false_means_neither_offered_nor_bound():
    tool = Tool("git_only", is_enabled_for_session=lambda s: s.has_git)
    snapshot = catalog([tool], session=SimpleNamespace(has_git=False))
    assert snapshot.names == []
    with pytest.raises(ToolRefusal, match='No tool named "git_only" is available in this chat.'):
        snapshot.bind("git_only")
    assert catalog([tool], session=SimpleNamespace(has_git=True)).names == ["git_only"]


def test_user_chats_tools_are_never_offered_in_a_tool_started_chat():
    tools = [Tool("isolate_session", availability="userChats"), Tool("plain")]
    clients = (client("ide", {"name": "pick", "availability": "userChats"}, {"name": "open"}),)
    in_user_chat = catalog(tools, active_clients=clients)
    in_tool_chat = catalog(tools, active_clients=clients, chat_origin_kind="tool")
    assert in_user_chat.names == ["isolate_session", "plain", "ide__pick", "ide__open"]
    assert in_tool_chat.names == ["plain", "ide__open"]


def test_a_user_chats_call_in_a_tool_chat_is_terminalised_by_the_host_with_no_client():
    clients = (client("ide", {"name": "pick", "availability": "userChats"}),)
    snapshot = catalog(active_clients=clients, chat_origin_kind="tool")
    with pytest.raises(ToolRefusal) as refused:
        snapshot.bind("ide__pick")
    assert refused.value.terminalise is True
    assert refused.value.sentence == (
        "ide__pick is only available in chats a person started, not in this tool-started chat."
    )


def test_absent_availability_means_session_and_stays_off_the_wire():
    snapshot = catalog([Tool("plain")], chat_origin_kind="tool")
    assert snapshot.names == ["plain"] and "availability" not in snapshot.definitions[0]
    assert catalog([Tool("p", availability="userChats")]).definitions[0]["availability"] == "userChats"


def test_an_allowlist_restricts_the_agent_to_exactly_those_tools_and_an_empty_one_to_none():
    tools = [Tool("a"), Tool("b")]
    clients = (client("ide", {"name": "c"}),)
    assert catalog(tools, active_clients=clients, allowlist=("b", "ide__c")).names == ["b", "ide__c"]
    assert catalog(tools, active_clients=clients, allowlist=None).names == ["a", "b", "ide__c"]
    # A definition whose tools are all missing (its MCP server unavailable) is offered nothing, not everything.
    assert catalog(tools, active_clients=clients, allowlist=()).names == []


def test_permission_rules_hide_a_tool_only_when_denied_for_every_resource():
    tools = [Tool("bash"), Tool("edit_file", permission_action="write"), Tool("read")]
    rules = (
        PermissionRule("*", "allow"),
        PermissionRule("bash", "deny"),
        PermissionRule("edit", "deny"),
    )
    assert catalog(tools, permission_rules=rules).names == ["read"]
    # A later allow for one resource keeps the tool visible: it is not denied everywhere.
    rules_with_exception = rules + (PermissionRule("bash", "allow", resource="git *"),)
    assert catalog(tools, permission_rules=rules_with_exception).names == ["bash", "read"]
    # Last match wins: a later blanket allow undoes the deny.
    assert catalog(tools, permission_rules=rules + (PermissionRule("b*", "ask"),)).names == ["bash", "read"]


def test_patch_and_write_share_edit_in_rules_too():
    tools = [Tool("apply_patch", permission_action="patch")]
    assert catalog(tools, permission_rules=(PermissionRule("write", "deny"),)).names == []


def test_for_session_wording_is_merged_over_the_definition():
    schema = {"type": "object", "properties": {"title": {"type": "string"}, "automatic": {"type": "boolean"}}}

    def wording(session):
        if session.title_strategy != "deferred":
            return None
        return {"inputSchema": {"type": "object", "properties": {"title": {"type": "string"}}}}

    tool = Tool("rename_chat", input_schema=schema, for_session=wording)
    deferred = catalog([tool], session=SimpleNamespace(title_strategy="deferred")).definitions[0]
    eager = catalog([tool], session=SimpleNamespace(title_strategy="eager")).definitions[0]
    assert "automatic" not in deferred["inputSchema"]["properties"]
    assert "automatic" in eager["inputSchema"]["properties"]


def test_a_call_is_checked_against_the_schema_the_session_was_offered():
    schema = {"type": "object", "properties": {"title": {"type": "string"}, "mode": {"enum": ["a", "b"]}}}

    def wording(session):
        return {"inputSchema": {"type": "object", "properties": {"title": {"type": "string"}, "mode": {"enum": ["a"]}}}}

    snapshot = catalog([Tool("rename_chat", input_schema=schema, for_session=wording)], session=SimpleNamespace())
    assert snapshot.check_input("rename_chat", {"title": "t", "mode": "a"}).name == "rename_chat"
    with pytest.raises(ToolRefusal) as refused:
        snapshot.check_input("rename_chat", {"title": "t", "mode": "b"})
    assert refused.value.sentence == "Invalid input for rename_chat at /mode: 'b' is not one of ['a']"


def test_defer_loading_is_a_host_side_hint_never_on_the_wire():
    snapshot = catalog([Tool("list_artifacts", defer_loading=True)])
    assert snapshot.deferred == {"list_artifacts"}
    assert "defer_loading" not in snapshot.definitions[0] and "deferLoading" not in snapshot.definitions[0]


def test_instructions_come_in_tool_order_then_always_applied_client_rules(caplog):
    tools = [Tool("a", instruction="Use a first."), Tool("b"), Tool("c", instruction="Then c.")]
    rules = (
        ("style.mdc", "---\nalwaysApply: true\n---\nWrite tests."),
        ("skip.mdc", "---\nalwaysApply: false\n---\nNot applied."),
        ("team.instructions.md", "---\ndescription: x\nalwaysApply: true\n---\n\nBe brief.\n"),
        ("notes.md", "---\nalwaysApply: true\n---\nWrong extension."),
        ("huge.mdc", "---\nalwaysApply: true\n---\n" + "x" * 4097),
    )
    with caplog.at_level(logging.WARNING):
        snapshot = catalog(tools, client_rules=rules)
    assert snapshot.instructions == ("Use a first.", "Then c.", "Write tests.", "Be brief.")
    assert "Dropped rule huge.mdc" in caplog.text


def test_calling_a_name_the_snapshot_does_not_hold_is_refused():
    with pytest.raises(ToolRefusal) as refused:
        catalog([Tool("a")]).bind("b")
    assert str(refused.value) == 'No tool named "b" is available in this chat.'


def test_input_is_validated_and_a_violation_names_the_json_pointer():
    schema = {"type": "object", "required": ["items"],
              "properties": {"items": {"type": "array", "items": {"type": "integer"}}}}
    snapshot = catalog([Tool("sum", input_schema=schema)])
    assert snapshot.check_input("sum", {"items": [1, 2]}).tool.name == "sum"
    with pytest.raises(ToolRefusal) as refused:
        snapshot.check_input("sum", {"items": [1, "two"]})
    assert str(refused.value) == "Invalid input for sum at /items/1: 'two' is not of type 'integer'"
    with pytest.raises(ToolRefusal, match="Invalid input for sum at /: 'items' is a required property"):
        snapshot.check_input("sum", {})


def test_a_snapshot_is_unaffected_by_later_registrations():
    from tools_app.catalog.registry import PluginTools, ToolRegistry

    registry = ToolRegistry()
    plugins = PluginTools(registry)
    plugins.register_tool(Tool("early"))
    snapshot = catalog(registry.tools)
    plugins.set_tools([Tool("late")])
    assert snapshot.names == ["early"] and snapshot.bind("early").tool.name == "early"
    assert catalog(registry.tools).names == ["late"]


def test_sessionless_tools_answer_by_caller():
    tools = [
        Tool("list_sessions", sessionless=True, grant="session:read"),
        Tool("create_session", sessionless=True, grant="session:write"),
        Tool("ping_host", sessionless=True),
        Tool("in_session_only"),
    ]

    def visible(caller):
        return [b.tool.name for b in sessionless_tools(tools, caller)]

    assert visible(Caller(is_root=True)) == ["list_sessions", "create_session", "ping_host"]
    assert visible(Caller(grants=("session:read",))) == ["list_sessions", "ping_host"]
    assert visible(Caller(grants=())) == ["ping_host"]
    assert visible(Caller(grants=(), has_users_directory=False)) == ["list_sessions", "create_session", "ping_host"]
    guest = Caller(grants=("session:read",))
    assert all(b.caller is guest for b in sessionless_tools(tools, guest))


def test_output_over_2000_lines_is_cut_and_says_where_the_rest_is():
    text = "\n".join(f"line {i}" for i in range(2500))
    shown, cut = bound_output(text, "ahp-tool-output:/abc")
    assert cut and shown.split("\n")[1999] == "line 1999" and "line 2000\n" not in shown
    assert shown.endswith("The full output is at ahp-tool-output:/abc.]")
    assert "showing 2000 of 2500 lines" in shown


def test_output_over_50_kib_is_cut_and_short_output_is_untouched():
    shown, cut = bound_output("é" * 40000, "ahp-tool-output:/x")
    assert cut and len(shown.split("\n[Output cut")[0].encode()) <= 50 * 1024
    assert bound_output("short", "ahp-tool-output:/y") == ("short", False)
