"""Client actions: fan-out with origin and a gap-free serverSeq, grants, host config live."""
import pytest

from tools_app.catalog.host_tools import PLUGINS, REGISTRY
from tools_app.catalog.registry import Tool
from tools_app.models import HostConfig

from .harness import AhpClient, set_config


def test_an_action_reaches_every_subscriber_with_its_origin(acme, host):
    with AhpClient(host.port, acme.tokens["member"], "a") as a, AhpClient(host.port, acme.tokens["guest"], "b") as b:
        session = a.create_session()
        a.subscribe(session)
        b.subscribe(session)
        seq = a.dispatch(session, {"type": "session/titleChanged", "title": "Refactor auth"})
        seen_by_b = b.action("session/titleChanged")
        assert seen_by_b["origin"] == {"clientId": "a", "clientSeq": seq}
        assert a.action("session/titleChanged")["serverSeq"] == seen_by_b["serverSeq"]
        assert b.subscribe(session)["title"] == "Refactor auth"


def test_server_seq_rises_by_one_per_published_action_host_wide(acme, host):
    with AhpClient(host.port, acme.tokens["member"]) as a:
        session = a.create_session()
        a.subscribe(session)
        a.subscribe("ahp-root://")
        for i in range(5):
            a.dispatch(session, {"type": "session/titleChanged", "title": f"t{i}"})
        seqs = [a.action("session/titleChanged")["serverSeq"] for _ in range(5)]
        assert seqs == list(range(seqs[0], seqs[0] + 5))


def test_a_refused_action_comes_back_with_the_grant_it_lacks(acme, host):
    with AhpClient(host.port, acme.tokens["member"], "a") as a, AhpClient(host.port, acme.tokens["guest"], "g") as g:
        session = a.create_session()
        g.subscribe(session)
        g.dispatch(session, {"type": "session/titleChanged", "title": "guest was here"})
        assert g.action("session/titleChanged", rejected=True)["rejectionReason"] == (
            "acme-guest may not session:rename here"
        )
        g.dispatch(session, {"type": "session/isArchivedChanged", "isArchived": True})
        assert g.action("session/isArchivedChanged", rejected=True)["rejectionReason"] == (
            "acme-guest may not session:mark here"
        )
        g.dispatch("ahp-root://", {"type": "root/configChanged", "config": {"advancedTools": True}})
        assert g.action("root/configChanged", rejected=True)["rejectionReason"] == (
            "acme-guest may not config:change here"
        )


def test_archiving_shows_in_the_status_bits(acme, host):
    with AhpClient(host.port, acme.tokens["member"]) as a:
        session = a.create_session()
        a.subscribe(session)
        a.dispatch(session, {"type": "session/isArchivedChanged", "isArchived": True})
        a.action("session/isArchivedChanged")
        assert a.subscribe(session)["status"] & 64


def test_config_changed_sets_keys_and_rejects_an_unknown_key_or_bad_value(acme, host):
    values = set_config(host.port, acme.tokens["root"], clientToolTimeoutMs=5000, advancedTools=True)
    assert values["clientToolTimeoutMs"] == 5000 and values["advancedTools"] is True
    with AhpClient(host.port, acme.tokens["root"], "ops") as ops:
        ops.subscribe("ahp-root://")
        ops.dispatch("ahp-root://", {"type": "root/configChanged", "config": {"warpDrive": True}})
        assert ops.action("root/configChanged", rejected=True)["rejectionReason"] == "Unknown configuration key warpDrive."
        ops.dispatch("ahp-root://", {"type": "root/configChanged", "config": {"clientToolTimeoutMs": -1}})
        assert ops.action("root/configChanged", rejected=True)["rejectionReason"] == (
            "clientToolTimeoutMs must be a whole number of milliseconds, 0 or more."
        )
        ops.dispatch("ahp-root://", {"type": "root/configChanged", "config": {"sessionTools": False}, "replace": True})
        replaced = ops.action("root/configChanged")["action"]
        assert replaced["replace"] is True
        assert replaced["config"]["clientToolTimeoutMs"] == 600000 and replaced["config"]["advancedTools"] is False
    config = HostConfig.objects.get(tenant=acme.tenant)
    assert (config.session_tools, config.client_tool_timeout_ms) == (False, 600000)


@pytest.fixture
def session_group_tool():
    PLUGINS.set_tools([Tool("list_sessions", group="session", description="Sessions beside this one")])
    yield
    PLUGINS.set_tools([])


def names(tools):
    return {t["name"] for t in tools}


def test_a_config_change_reaches_running_sessions_as_server_tools_changed(acme, host, session_group_tool):
    session_group = {t.effective_name for t in REGISTRY.tools if t.group == "session"}
    with AhpClient(host.port, acme.tokens["member"]) as a:
        session = a.create_session()
        offered = names(a.subscribe(session)["serverTools"])
        assert "list_sessions" in offered
        set_config(host.port, acme.tokens["root"], sessionTools=False)
        assert names(a.action("session/serverToolsChanged")["action"]["tools"]) == offered - session_group
        set_config(host.port, acme.tokens["root"], sessionTools=True, sessionToolsProviders=["copilot"])
        a.dispatch(session, {"type": "session/titleChanged", "title": "no change to tools"})
        a.action("session/titleChanged")
        assert not [n for n in a.notifications if n["params"]["action"]["type"] == "session/serverToolsChanged"]
        set_config(host.port, acme.tokens["root"], sessionToolsProviders=["echo"])
        assert names(a.action("session/serverToolsChanged")["action"]["tools"]) == offered


def test_registering_and_disposing_tools_reaches_running_sessions(acme, host):
    with AhpClient(host.port, acme.tokens["member"]) as a:
        session = a.create_session()
        offered = names(a.subscribe(session)["serverTools"])
        PLUGINS.register_tool(Tool("lint", description="Lint the workspace"))
        try:
            assert names(a.action("session/serverToolsChanged")["action"]["tools"]) == offered | {"lint"}
        finally:
            PLUGINS.set_tools([])
        assert names(a.action("session/serverToolsChanged")["action"]["tools"]) == offered


def test_a_turns_model_is_kept_and_shown_with_its_message(acme, host):
    from .harness import default_chat

    with AhpClient(host.port, acme.tokens["member"], "alice") as alice:
        chat = default_chat(alice, alice.create_session())
        alice.subscribe(chat)
        alice.dispatch(chat, {"type": "chat/turnStarted", "turnId": "0b1e5a8e-4c3f-4f7e-9d2a-5b6c7d8e9f01",
                              "message": {"text": "hi", "origin": {"kind": "user"}, "model": {"id": "echo-1"}}})
        started = alice.action("chat/turnStarted")["action"]
        assert started["message"]["model"] == {"id": "echo-1"}
        alice.action("chat/turnComplete")
        assert alice.subscribe(chat)["turns"][-1]["message"]["model"] == {"id": "echo-1"}
        alice.dispatch(chat, {"type": "chat/turnStarted", "turnId": "0b1e5a8e-4c3f-4f7e-9d2a-5b6c7d8e9f02",
                              "message": {"text": "hi", "model": 7}})
        assert alice.action("chat/turnStarted", rejected=True)["rejectionReason"] == (
            "message.model must be a model id or {id}.")
