"""The model picker and the session's settings: resolveSessionConfig, sessionConfigCompletions,
session/configChanged and session/defaultChatChanged over a real socket."""
import uuid

import pytest

from .harness import AhpClient, RpcFailed

ROOT = "ahp-root://"


@pytest.fixture
def member(acme, host):
    with AhpClient(host.port, acme.tokens["member"], "member-client") as client:
        yield client


def test_resolve_session_config_names_the_agents_models_and_its_default(member):
    answer = member.call("resolveSessionConfig", {"channel": ROOT, "provider": "echo", "config": {"isolation": "folder"}})
    assert answer["schema"]["properties"]["model"] == {
        "type": "string", "title": "Model", "sessionMutable": True, "enum": ["echo-1"], "enumLabels": ["Echo"]}
    assert answer["values"] == {"model": "echo-1", "isolation": "folder"}
    # What it resolves starts a session, and the session's snapshot carries the same schema.
    session = member.create_session(config=answer["values"])
    assert member.subscribe(session)["config"] == {"schema": answer["schema"], "values": answer["values"]}


def test_session_config_completions_filters_a_settings_values(member):
    assert member.call("sessionConfigCompletions", {"channel": ROOT, "provider": "echo", "property": "model",
                                                    "query": "ECH"}) == {"items": [{"value": "echo-1", "label": "Echo"}]}
    assert member.call("sessionConfigCompletions", {"channel": ROOT, "provider": "echo", "property": "isolation",
                                                    "query": "work"})["items"] == [
        {"value": "worktree", "label": "worktree"}]


def test_the_agent_definition_setting_completes_to_the_tenants_definitions_for_that_agent(acme, globex, member):
    from tools_app.models import AgentDefinition

    for tenant, name, provider in [(acme.tenant, "reviewer", "echo"), (acme.tenant, "writer", "echo"),
                                   (acme.tenant, "pilot", "github-copilot"), (globex.tenant, "rival", "echo")]:
        AgentDefinition.objects.create(tenant=tenant, name=name, provider=provider)
    ask = lambda query: member.call("sessionConfigCompletions", {
        "channel": ROOT, "provider": "echo", "property": "agentDefinition", "query": query})["items"]
    assert ask("") == [{"value": "reviewer", "label": "reviewer"}, {"value": "writer", "label": "writer"}]
    assert ask("WRI") == [{"value": "writer", "label": "writer"}]


@pytest.mark.parametrize("method, params, code, message", [
    ("resolveSessionConfig", {"provider": "ghost"}, -32002, "No agent for provider ghost."),
    ("resolveSessionConfig", {"config": []}, -32602, "Invalid params: config must be an object."),
    ("sessionConfigCompletions", {"provider": "echo"}, -32602, "Invalid params: property is required."),
    ("sessionConfigCompletions", {"provider": "echo", "property": "colour"}, -32602,
     "Invalid params: the agent echo has no setting colour."),
])
def test_bad_config_questions_are_refused(member, method, params, code, message):
    with pytest.raises(RpcFailed) as failed:
        member.call(method, {"channel": ROOT, **params})
    assert (failed.value.code, failed.value.message) == (code, message)


def test_a_client_changes_the_model_mid_session(member):
    session = member.create_session(config={"model": "echo-1", "isolation": "folder"})
    member.subscribe(session)
    member.dispatch(session, {"type": "session/configChanged", "config": {"model": "echo-1"}})
    assert member.action("session/configChanged")["action"]["config"] == {"model": "echo-1"}
    assert member.subscribe(session)["config"]["values"] == {"model": "echo-1", "isolation": "folder"}


@pytest.mark.parametrize("config, reason", [
    ({"isolation": "worktree"}, "isolation is fixed when the session starts."),
    ({"colour": "blue"}, "The session's agent has no setting colour."),
    ({"model": "gpt-9"}, "Invalid config at /model: 'gpt-9' is not one of ['echo-1']"),
    ("echo-1", "session/configChanged needs a config that is an object."),
])
def test_a_config_change_the_schema_forbids_is_rejected(member, config, reason):
    session = member.create_session()
    member.subscribe(session)
    member.dispatch(session, {"type": "session/configChanged", "config": config})
    assert member.action("session/configChanged", rejected=True)["rejectionReason"] == reason


def test_a_guest_may_not_change_a_sessions_config(acme, host, member):
    session = member.create_session()
    with AhpClient(host.port, acme.tokens["guest"], "guest") as guest:
        guest.subscribe(session)
        guest.dispatch(session, {"type": "session/configChanged", "config": {"model": "echo-1"}})
        assert guest.action("session/configChanged", rejected=True)["rejectionReason"] == (
            "acme-guest may not session:configure here")


def test_the_default_chat_must_be_one_of_the_sessions_chats(member):
    session, other = member.create_session(), member.create_session()
    elsewhere = member.subscribe(other)["defaultChat"]
    member.subscribe(session)
    for chat in (elsewhere, f"ahp-chat:/{uuid.uuid4()}"):
        member.dispatch(session, {"type": "session/defaultChatChanged", "defaultChat": chat})
        assert member.action("session/defaultChatChanged", rejected=True)["rejectionReason"] == (
            f"{chat} is not a chat of this session.")
    member.dispatch(session, {"type": "session/defaultChatChanged"})  # the types' way to clear the hint
    assert member.action("session/defaultChatChanged", rejected=True)["rejectionReason"] == (
        "session/defaultChatChanged needs a defaultChat: every session here keeps a default chat.")


def test_the_default_chat_changes_in_the_types_shape(member):
    session = member.create_session()
    first = member.subscribe(session)["defaultChat"]
    chat = f"ahp-chat:/{uuid.uuid4()}"
    member.call("createChat", {"channel": session, "chat": chat})
    seq = member.dispatch(session, {"type": "session/defaultChatChanged", "defaultChat": chat})
    envelope = member.action("session/defaultChatChanged")
    assert envelope["action"] == {"type": "session/defaultChatChanged", "defaultChat": chat}
    assert envelope["origin"] == {"clientId": member.client_id, "clientSeq": seq}
    assert member.subscribe(session)["defaultChat"] == chat != first


def test_create_session_refuses_a_config_session_config_changed_would_refuse(member):
    """One check for both doors: createSession's config meets the schema configChanged holds to."""
    uri = f"ahp-session:/{uuid.uuid4()}"
    with pytest.raises(RpcFailed) as failed:
        member.call("createSession", {"channel": uri, "provider": "echo", "config": {"model": "gpt-nope"}})
    assert (failed.value.code, failed.value.message) == (
        -32602, "Invalid config at /model: 'gpt-nope' is not one of ['echo-1']")
    with pytest.raises(RpcFailed) as failed:
        member.call("createSession", {"channel": uri, "provider": "echo", "model": {"id": "gpt-nope"}})
    assert failed.value.message == "Invalid config at /model: 'gpt-nope' is not one of ['echo-1']"
    assert member.call("listSessions", {"channel": ROOT})["items"] == []


def test_create_session_applies_its_model_and_agent_selections(acme, member):
    from tools_app.models import AgentDefinition

    AgentDefinition.objects.create(tenant=acme.tenant, name="reviewer", provider="echo")
    session = member.create_session(model={"id": "echo-1"}, agent={"uri": "reviewer"})
    assert member.subscribe(session)["config"]["values"] == {"model": "echo-1", "agentDefinition": "reviewer"}
    with pytest.raises(RpcFailed) as failed:
        member.create_session(agent={"uri": "ghost"})
    assert (failed.value.code, failed.value.message) == (-32602, 'No agent definition "ghost" in this tenant.')
    with pytest.raises(RpcFailed) as failed:
        member.create_session(agent="reviewer")
    assert failed.value.message == "Invalid params: agent must be an AgentSelection {uri}."


def test_a_message_s_agent_must_be_the_session_s_agent_definition(acme, member):
    from tools_app.models import AgentDefinition

    AgentDefinition.objects.create(tenant=acme.tenant, name="reviewer", provider="echo")
    session = member.create_session(agent={"uri": "reviewer"})
    chat = member.subscribe(session)["defaultChat"]
    member.subscribe(chat)
    for agent, accepted in (({"uri": "writer"}, False), ({"uri": "reviewer"}, True)):
        turn_id = str(uuid.uuid4())
        member.dispatch(chat, {"type": "chat/turnStarted", "turnId": turn_id, "message": {
            "text": "hi", "origin": {"kind": "user"}, "agent": agent}})
        if accepted:
            assert member.reply_to(turn_id) == "hi"
        else:
            assert member.action("chat/turnStarted", rejected=True)["rejectionReason"] == (
                "message.agent names writer, but this session runs agent definition reviewer; "
                "its agent is fixed when the session starts.")
