"""The catalog's inputs from the rows, end to end over a real socket: the session's agent
definition narrows and hides tools, and the active clients' always-applied rules reach the
instructions."""
import base64

from sessions_app.models import Chat
from tools_app.loader import catalog_for_chat
from tools_app.models import AgentDefinition

from ..protocol.harness import AhpClient, default_chat

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
        AgentDefinition.objects.create(tenant=acme.tenant, name="copilot", provider="github-copilot", tools=[
            {"kind": "github-cli-builtin-tools", "excluded-tools": {"tools": [f"custom:{hidden}"]}}])
        _, chat = open_chat(alice, config={"agentDefinition": "copilot"})
        assert offered_tools(alice, chat) == everything[1:]


def test_a_session_naming_a_missing_definition_is_offered_what_it_would_be_without_one(acme, host):
    with AhpClient(host.port, acme.tokens["member"], "alice") as alice:
        _, plain_chat = open_chat(alice)
        _, chat = open_chat(alice, config={"agentDefinition": "nobody-made-this"})
        assert offered_tools(alice, chat) == offered_tools(alice, plain_chat)


def data_uri(text):
    return "data:text/markdown;base64," + base64.b64encode(text.encode()).decode()


def test_an_always_applied_rule_a_client_publishes_joins_the_instructions(acme, host):
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
