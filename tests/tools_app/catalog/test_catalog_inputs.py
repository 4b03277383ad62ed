"""The catalog's inputs from the rows, end to end over a real socket: the session's agent
definition narrows and hides tools, and the active clients' always-applied rules reach the
instructions."""
import base64

from sessions_app.models import Chat
from tools_app.catalog.client_rules import left_out_by_reference
from tools_app.catalog.loader import catalog_for_chat
from tools_app.models import AgentDefinition

from ...ahp.protocol.harness import AhpClient, default_chat

RULE = "---\ndescription: house style\nalwaysApply: true\n---\nAnswer in British English.\n"
OPTIONAL_RULE = "---\nalwaysApply: false\n---\nOnly when asked.\n"


def offered_tools(client, chat):
    return client.reply_to(client.start_turn(chat, "/tools")).split("\n")


def open_chat(client, **params):
    session = client.create_session(**params)
    chat = default_chat(client, session)
    client.subscribe(chat)
    return session, chat


def test_an_agent_definitions_tools_are_all_the_host_tools_its_sessions_are_offered(acme, host):
    with AhpClient(host.port, acme.tokens["member"], "alice") as alice:
        _, plain_chat = open_chat(alice)
        everything = offered_tools(alice, plain_chat)
        kept, left_out = everything[0], everything[1]
        AgentDefinition.objects.create(tenant=acme.tenant, name="narrow", provider="echo", tools=[{"kind": kept}])
        _, chat = open_chat(alice, config={"agentDefinition": "narrow"})
        assert offered_tools(alice, chat) == [kept]
        assert left_out in everything


def test_a_tool_the_builtin_entry_excludes_as_custom_is_hidden(acme, host):
    with AhpClient(host.port, acme.tokens["member"], "alice") as alice:
        _, plain_chat = open_chat(alice)
        everything = offered_tools(alice, plain_chat)
        hidden = everything[0]
        # On echo, whose /tools shows the catalog: a session's definition runs on its provider.
        AgentDefinition.objects.create(tenant=acme.tenant, name="copilot", provider="echo", tools=[
            {"kind": "github-cli-builtin-tools", "excluded-tools": {"tools": [f"custom:{hidden}"]}}])
        _, chat = open_chat(alice, config={"agentDefinition": "copilot"})
        assert offered_tools(alice, chat) == everything[1:]


def test_a_session_whose_definition_is_gone_is_offered_what_it_would_be_without_one(acme, host):
    AgentDefinition.objects.create(tenant=acme.tenant, name="short-lived", provider="echo", tools=[
        {"kind": "github-cli-builtin-tools", "excluded-tools": {"tools": ["custom:*"]}}])
    with AhpClient(host.port, acme.tokens["member"], "alice") as alice:
        _, plain_chat = open_chat(alice)
        _, chat = open_chat(alice, config={"agentDefinition": "short-lived"})
        assert offered_tools(alice, chat) == [""]
        AgentDefinition.objects.filter(name="short-lived").delete()
        assert offered_tools(alice, chat) == offered_tools(alice, plain_chat)


def data_uri(text):
    return "data:text/markdown;base64," + base64.b64encode(text.encode()).decode()


def test_an_always_applied_rule_a_client_publishes_joins_the_instructions(acme, host, caplog):
    left_out_by_reference.cache_clear()
    plugin = {"type": "plugin", "id": "style", "uri": "file:///home/dev/plugins/style", "name": "style",
              "enabled": True, "children": [
                  {"type": "rule", "id": "r1", "name": "style.mdc", "uri": data_uri(RULE), "alwaysApply": True},
                  {"type": "rule", "id": "r2", "name": "maybe.mdc", "uri": data_uri(OPTIONAL_RULE)},
                  {"type": "rule", "id": "r3", "name": "remote.mdc", "uri": "file:///home/dev/remote.mdc",
                   "alwaysApply": True},
              ]}
    with AhpClient(host.port, acme.tokens["member"], "alice") as alice:
        session, chat = open_chat(alice)
        alice.subscribe(session)
        alice.dispatch(session, {"type": "session/activeClientSet", "activeClient": {
            "clientId": alice.client_id, "tools": [], "customizations": [plugin]}})
        alice.action("session/activeClientSet")
        snapshot = catalog_for_chat(Chat.objects.get(id=chat.split("/")[-1]))
    assert snapshot.instructions[-1] == "Answer in British English."
    assert not any("Only when asked" in text for text in snapshot.instructions)
    # A rule published by reference is left out, and the log says which and why (once).
    assert [r.getMessage() for r in caplog.records if "by reference" in r.getMessage()] == [
        "Left out rule remote.mdc: it is published by reference (file:///home/dev/remote.mdc), and this host reads "
        "only rules whose text a data: URI carries"]


def test_an_mcp_entry_names_its_servers_tools_or_only_its_allowed_ones():
    from tools_app.catalog.registry import Tool
    from tools_app.definitions.agent_definitions import catalog_allowlist

    tools = (Tool("read"), Tool("issues", namespace="github", source="mcp"),
             Tool("pulls", namespace="github", source="mcp"), Tool("pages", namespace="wiki", source="mcp"))
    whole = {"name": "a", "provider": "echo", "tools": [{"kind": "mcp", "serverName": "github"}, {"kind": "read"}]}
    assert catalog_allowlist(whole, tools) == ("github_issues", "github_pulls", "read")
    narrowed = {"name": "a", "provider": "echo", "tools": [
        {"kind": "mcp", "serverName": "github", "allowedTools": ["pulls"]},
        {"kind": "agent-definition", "agent": "helper"}]}
    assert catalog_allowlist(narrowed, tools) == ("github_pulls",)


def test_an_mcp_entry_whose_server_offers_nothing_names_nothing_and_restricts_the_agent():
    from tools_app.catalog.registry import Tool
    from tools_app.definitions.agent_definitions import catalog_allowlist

    tools = (Tool("read"), Tool("pages", namespace="wiki", source="mcp"))
    unlisted = {"name": "a", "provider": "echo", "tools": [{"kind": "mcp", "serverName": "github"}]}
    assert catalog_allowlist(unlisted, tools) == ()
    helper_only = {"name": "a", "provider": "echo", "tools": [{"kind": "agent-definition", "agent": "helper"}]}
    assert catalog_allowlist(helper_only, tools) is None


def test_rule_text_travels_percent_encoded_or_base64_and_nothing_else_is_read():
    from tools_app.catalog.client_rules import published_rules

    def plugin(*children, enabled=True):
        return {"type": "plugin", "id": "p", "uri": "file:///p", "name": "p", "enabled": enabled, "children": list(children)}

    plain = {"type": "rule", "id": "1", "name": "a.mdc", "uri": "data:,%2D%2D%2Dhi"}
    encoded = {"type": "rule", "id": "2", "name": "b.mdc", "uri": data_uri("yo")}
    broken = {"type": "rule", "id": "3", "name": "c.mdc", "uri": "data:;base64,@@"}
    skill = {"type": "skill", "id": "4", "name": "d", "uri": data_uri("no")}
    assert published_rules([plugin(plain, encoded, broken, skill), plugin(encoded, enabled=False)]) == [
        ("a.mdc", "---hi"), ("b.mdc", "yo")]
