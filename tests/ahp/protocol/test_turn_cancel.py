"""chat/turnCancelled from a client: the running turn stops, the calls it waits on end
cancelled, and the chat's copy in every client agrees with a fresh snapshot."""
import time
import uuid

import pytest

from .harness import AhpClient, default_chat
from .test_events import OWED_CALL_STOPPED, owe_a_client_tool_call


@pytest.fixture
def member(acme, host):
    with AhpClient(host.port, acme.tokens["member"], "member-client") as client:
        yield client


def test_cancelling_a_turn_cancels_the_call_it_waits_on_and_ends_it_cancelled(member):
    session = member.create_session()
    chat = default_chat(member, session)
    watch, turn, request = owe_a_client_tool_call(member, session)
    seq = member.dispatch(chat, {"type": "chat/turnCancelled", "turnId": turn})
    completed = member.action("chat/toolCallComplete", toolCallId=request["id"])["action"]
    assert completed["result"]["success"] is False
    assert completed["result"]["error"] == {"message": "The turn was cancelled.", "code": "cancelled"}
    cancelled = member.action("chat/turnCancelled", turnId=turn)
    assert cancelled["origin"] == {"clientId": "member-client", "clientSeq": seq}
    watch.assert_consistent(actions=OWED_CALL_STOPPED)
    fresh = member.subscribe(chat)
    assert "activeTurn" not in fresh and fresh["turns"][-1]["state"] == "cancelled"
    assert member.subscribe(session)["inputNeeded"] == []
    # The agent's answer, woken by the cancelled call, is dropped: the turn stays cancelled.
    assert member.call("ping", {"channel": "ahp-root://"}) is None
    assert not [n for n in member.notifications if n["params"].get("action", {}).get("type") == "chat/turnComplete"]


def test_cancelling_with_no_turn_running_is_rejected(member):
    session = member.create_session()
    chat = default_chat(member, session)
    member.subscribe(chat)
    turn = member.start_turn(chat, "hello")
    member.reply_to(turn)
    member.dispatch(chat, {"type": "chat/turnCancelled", "turnId": turn})
    assert member.action("chat/turnCancelled", rejected=True)["rejectionReason"] == (
        f"No turn {turn} is running in this chat.")
    member.dispatch(chat, {"type": "chat/turnCancelled", "turnId": "t1"})
    assert member.action("chat/turnCancelled", rejected=True)["rejectionReason"] == (
        "chat/turnCancelled needs a turnId that is a UUID.")


def test_a_guest_may_not_cancel_a_members_turn(acme, host, member):
    session = member.create_session()
    chat = default_chat(member, session)
    _, turn, _ = owe_a_client_tool_call(member, session)
    with AhpClient(host.port, acme.tokens["guest"], "guest") as guest:
        guest.subscribe(chat)
        guest.dispatch(chat, {"type": "chat/turnCancelled", "turnId": turn})
        assert guest.action("chat/turnCancelled", rejected=True)["rejectionReason"] == (
            "acme-guest may not chat:cancel here")
    assert member.subscribe(chat)["activeTurn"]["id"] == turn


def test_another_tenant_cannot_cancel_a_turn(globex, host, member):
    session = member.create_session()
    chat = default_chat(member, session)
    _, turn, _ = owe_a_client_tool_call(member, session)
    with AhpClient(host.port, globex.tokens["root"], "intruder") as intruder:
        intruder.dispatch(chat, {"type": "chat/turnCancelled", "turnId": turn})
        assert intruder.call("ping", {"channel": "ahp-root://"}) is None
        assert not [n for n in intruder.notifications if n.get("method") == "action"]
    assert member.subscribe(chat)["activeTurn"]["id"] == turn
    assert uuid.UUID(turn)


def test_a_cancelled_turns_agent_begins_no_further_calls(member):
    from sessions_app.models import ToolCall

    session = member.create_session()
    chat = default_chat(member, session)
    member.subscribe(chat)
    member.dispatch(session, {"type": "session/activeClientSet", "activeClient": {
        "clientId": "member-client", "tools": [{"name": "open_file", "inputSchema": {"type": "object"}}]}})
    member.action("session/activeClientSet")
    turn = member.start_turn(chat, '/call member-client__open_file {}\n/call ahp_terminals {}')
    member.action("chat/toolCallReady", turnId=turn)
    member.dispatch(chat, {"type": "chat/turnCancelled", "turnId": turn})
    member.action("chat/turnCancelled", turnId=turn)
    time.sleep(1)  # the echo agent, woken by the cancelled call, goes on to its second line
    assert [c.tool_name for c in ToolCall.objects.filter(turn_id=turn)] == ["open_file"]  # drawn under the name the client announced
