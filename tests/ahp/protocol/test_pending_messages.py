"""Steering and queued messages from a client: held while the chat is busy, taken in order when
it falls free, taken at once by an idle chat."""
import uuid

import pytest

from .harness import AhpClient, default_chat
from .test_events import owe_a_client_tool_call, pending


@pytest.fixture
def member(acme, host):
    with AhpClient(host.port, acme.tokens["member"], "member-client") as client:
        yield client


def busy_chat(member):
    session = member.create_session()
    chat = default_chat(member, session)
    member.subscribe(chat)
    _, turn, _ = owe_a_client_tool_call(member, session)
    return chat, turn


def test_a_busy_chat_takes_its_steering_message_then_its_queue_in_the_order_set(member):
    chat, turn = busy_chat(member)
    first, second, steer = (str(uuid.uuid4()) for _ in range(3))
    for kind, message_id, text in (("queued", first, "one"), ("queued", second, "two"), ("steering", steer, "s")):
        member.dispatch(chat, pending(kind, message_id, text))
        assert member.action("chat/pendingMessageSet", id=message_id)["action"]["kind"] == kind
    member.dispatch(chat, {"type": "chat/queuedMessagesReordered", "order": [second, "not-queued"]})
    assert member.action("chat/queuedMessagesReordered")["action"]["order"] == [second, first]
    state = member.subscribe(chat)
    assert state["steeringMessage"]["message"]["text"] == "s"
    assert [m["message"]["text"] for m in state["queuedMessages"]] == ["two", "one"]
    member.dispatch(chat, {"type": "chat/turnCancelled", "turnId": turn})
    texts = []
    for expected in (steer, second, first):
        started = member.action("chat/turnStarted", queuedMessageId=expected)["action"]
        texts.append(member.reply_to(started["turnId"]))
    assert texts == ["s", "two", "one"]
    assert "queuedMessages" not in member.subscribe(chat)


def test_an_idle_chat_takes_a_queued_message_at_once(member):
    session = member.create_session()
    chat = default_chat(member, session)
    member.subscribe(chat)
    message_id = str(uuid.uuid4())
    member.dispatch(chat, pending("queued", message_id, "right away"))
    started = member.action("chat/turnStarted", queuedMessageId=message_id)["action"]
    assert member.reply_to(started["turnId"]) == "right away"


def test_a_removed_message_is_never_sent_and_removing_it_again_is_rejected(member):
    chat, turn = busy_chat(member)
    message_id = str(uuid.uuid4())
    member.dispatch(chat, pending("queued", message_id, "never mind"))
    member.action("chat/pendingMessageSet", id=message_id)
    for expected_rejection in (False, True):
        member.dispatch(chat, {"type": "chat/pendingMessageRemoved", "kind": "queued", "id": message_id})
        removed = member.action("chat/pendingMessageRemoved", rejected=expected_rejection)
    assert removed["rejectionReason"] == f"No queued message {message_id} waits in this chat."
    assert "queuedMessages" not in member.subscribe(chat)


@pytest.mark.parametrize("action, reason", [
    (pending("urgent", str(uuid.UUID(int=1)), "x"), "chat/pendingMessageSet needs a kind that is steering or queued."),
    (pending("queued", "m1", "x"), "chat/pendingMessageSet needs an id that is a UUID."),
    ({**pending("queued", str(uuid.UUID(int=1)), "x"), "message": {"text": "x", "origin": {"kind": "agent"}}},
     "Clients may send only user messages."),
    ({"type": "chat/queuedMessagesReordered", "order": "m1"},
     "chat/queuedMessagesReordered needs an order that is an array of message ids."),
])
def test_malformed_pending_actions_are_rejected_with_their_reason(member, action, reason):
    chat, _ = busy_chat(member)
    member.dispatch(chat, action)
    assert member.action(action["type"], rejected=True)["rejectionReason"] == reason


def test_a_message_id_of_another_chat_is_refused(member):
    chat, _ = busy_chat(member)
    other, _ = busy_chat(member)
    message_id = str(uuid.uuid4())
    member.dispatch(chat, pending("queued", message_id, "mine"))
    member.action("chat/pendingMessageSet", id=message_id)
    member.dispatch(other, pending("queued", message_id, "hijack"))
    assert member.action("chat/pendingMessageSet", rejected=True)["rejectionReason"] == (
        f"Pending message {message_id} already exists.")


def test_a_guest_may_not_queue_messages(acme, host, member):
    chat, _ = busy_chat(member)
    with AhpClient(host.port, acme.tokens["guest"], "guest") as guest:
        guest.subscribe(chat)
        guest.dispatch(chat, pending("queued", str(uuid.uuid4()), "hi"))
        assert guest.action("chat/pendingMessageSet", rejected=True)["rejectionReason"] == (
            "acme-guest may not chat:send here")


def test_a_draft_is_kept_shown_to_every_subscriber_and_cleared(acme, host, member):
    session = member.create_session()
    chat = default_chat(member, session)
    before = member.subscribe(chat)
    draft = {"text": "half a thought", "model": {"id": "echo-1"}, "origin": {"kind": "user"}}
    member.dispatch(chat, {"type": "chat/draftChanged", "draft": draft})
    assert member.action("chat/draftChanged")["action"]["draft"] == draft
    with AhpClient(host.port, acme.tokens["member"], "second-window") as other:
        state = other.subscribe(chat)
        assert state["draft"] == draft and state["modifiedAt"] == before["modifiedAt"]
        member.dispatch(chat, {"type": "chat/draftChanged"})
        assert "draft" not in other.action("chat/draftChanged")["action"]
    assert "draft" not in member.subscribe(chat)


def test_a_bad_draft_or_a_reader_s_draft_is_rejected_and_changes_nothing(acme, host, member):
    session = member.create_session()
    chat = default_chat(member, session)
    member.subscribe(chat)
    member.dispatch(chat, {"type": "chat/draftChanged", "draft": {"model": "x"}})
    assert member.action("chat/draftChanged", rejected=True)["rejectionReason"] == (
        "chat/draftChanged needs draft.text, or no draft to clear it.")
    with AhpClient(host.port, acme.tokens["guest"], "guest-client") as guest:
        guest.subscribe(chat)
        guest.dispatch(chat, {"type": "chat/draftChanged", "draft": {"text": "mine"}})
        assert guest.action("chat/draftChanged", rejected=True)["rejectionReason"] == (
            "acme-guest may not chat:draft here")
    assert "draft" not in member.subscribe(chat)


def test_an_idle_chat_keeps_a_steering_message_until_a_turn_comes(member):
    """1.1: "Steering messages added while idle are silently stored and consumed when a turn
    becomes active": no turn starts for it; the next turn's end takes it."""
    session = member.create_session()
    chat = default_chat(member, session)
    member.subscribe(chat)
    steer = str(uuid.uuid4())
    member.dispatch(chat, pending("steering", steer, "mind the tests"))
    assert member.action("chat/pendingMessageSet", id=steer)["action"]["kind"] == "steering"
    state = member.subscribe(chat)
    assert "activeTurn" not in state and state["steeringMessage"]["message"]["text"] == "mind the tests"
    assert not [f for f in member.notifications if f.get("method") == "action"
                and f["params"]["action"]["type"] in ("chat/turnStarted", "chat/pendingMessageRemoved")]
    first = member.start_turn(chat, "go")
    assert member.reply_to(first) == "go"
    member.action("chat/pendingMessageRemoved", kind="steering", id=steer)
    started = member.action("chat/turnStarted", queuedMessageId=steer)["action"]
    assert member.reply_to(started["turnId"]) == "mind the tests"
    assert "steeringMessage" not in member.subscribe(chat)
