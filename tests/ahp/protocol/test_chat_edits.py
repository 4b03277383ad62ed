"""chat/truncated (edit and resend), and the answers to questions this host never asks
(chat/toolCallResultConfirmed, chat/inputAnswerChanged, chat/inputCompleted)."""
import uuid

import pytest

from .harness import AhpClient, default_chat
from .test_events import OWED_CALL_STOPPED, Watch, owe_a_client_tool_call


@pytest.fixture
def member(acme, host):
    with AhpClient(host.port, acme.tokens["member"], "member-client") as client:
        yield client


def chat_with_turns(member, count):
    session = member.create_session()
    chat = default_chat(member, session)
    member.subscribe(chat)
    turns = []
    for i in range(count):
        turns.append(member.start_turn(chat, f"message {i}"))
        member.reply_to(turns[-1])
    return session, chat, turns


@pytest.mark.parametrize("keep", [1, None])
def test_truncating_keeps_the_turns_up_to_the_one_named(member, keep):
    session, chat, turns = chat_with_turns(member, 3)
    watch = Watch(member, session, chat)
    action = {"type": "chat/truncated", **({"turnId": turns[keep]} if keep is not None else {})}
    member.dispatch(chat, action)
    member.action("chat/truncated")
    watch.assert_consistent(actions=2)  # chat/truncated, and the chat's summary on its session
    assert [t["id"] for t in member.subscribe(chat)["turns"]] == (turns[: keep + 1] if keep is not None else [])
    # Edit and resend: a new turn after the kept ones.
    member.reply_to(member.start_turn(chat, "edited"))
    assert member.subscribe(chat)["turns"][-1]["message"]["text"] == "edited"


def test_truncating_drops_a_running_turn_and_the_chat_is_idle(member):
    session = member.create_session()
    chat = default_chat(member, session)
    member.subscribe(chat)
    watch, turn, _ = owe_a_client_tool_call(member, session)
    member.dispatch(chat, {"type": "chat/truncated"})
    member.action("chat/truncated")
    watch.assert_consistent(actions=OWED_CALL_STOPPED)
    fresh = member.subscribe(chat)
    assert "activeTurn" not in fresh and fresh["status"] & 31 == 1


def test_truncating_at_a_turn_that_is_not_an_ended_turn_of_the_chat_is_rejected(member):
    _, chat, _ = chat_with_turns(member, 1)
    nobody = str(uuid.uuid4())
    member.dispatch(chat, {"type": "chat/truncated", "turnId": nobody})
    assert member.action("chat/truncated", rejected=True)["rejectionReason"] == f"No ended turn {nobody} in this chat."


def test_a_guest_may_not_truncate(acme, host, member):
    _, chat, _ = chat_with_turns(member, 1)
    with AhpClient(host.port, acme.tokens["guest"], "guest") as guest:
        guest.subscribe(chat)
        guest.dispatch(chat, {"type": "chat/truncated"})
        assert guest.action("chat/truncated", rejected=True)["rejectionReason"] == "acme-guest may not chat:truncate here"
    assert len(member.subscribe(chat)["turns"]) == 1


def test_answers_to_questions_never_asked_are_rejected(member):
    _, chat, turns = chat_with_turns(member, 1)
    call = str(uuid.uuid4())
    for action, reason in (
        ({"type": "chat/toolCallResultConfirmed", "turnId": turns[0], "toolCallId": call, "approved": True},
         f"Tool call {call} has no result waiting for confirmation."),
        ({"type": "chat/inputAnswerChanged", "requestId": "r1", "questionId": "q1"},
         "No input request r1 is open in this chat."),
        ({"type": "chat/inputCompleted", "requestId": "r1", "response": "accept"},
         "No input request r1 is open in this chat."),
    ):
        member.dispatch(chat, action)
        assert member.action(action["type"], rejected=True)["rejectionReason"] == reason
