"""get_session_context: levels, caps and pages, tool calls, messages sent by me."""
import uuid

import pytest

from kernel.refusals import Refused
from sessions_app import actions

from .conftest import Place


def finished(place, text, reply):
    turn = actions.do_start_turn(place.principal, place.chat, uuid.uuid4(), text)
    actions.do_end_turn(turn.id, response_text=reply)
    return turn


@pytest.fixture
def watched(acme, place):
    """Another session with two finished turns and one running."""
    other = Place(acme)
    actions.do_end_turn(other.turn.id, response_text="first reply")
    long_turn = finished(other, "write a lot", "x" * 20000)
    running = actions.do_start_turn(other.principal, other.chat, uuid.uuid4(), "still going")
    ok = actions.do_begin_tool_call(running, "list_sessions", {"a": 1})
    actions.do_complete_tool_call(ok.id, {"success": True, "pastTenseMessage": "Listed"})
    bad = actions.do_begin_tool_call(running, "delete_session", {"session": "s"})
    actions.do_complete_tool_call(bad.id, actions.failure("delete_session", "e" * 500))
    return other, long_turn


def test_summary_caps_replies_and_names_the_turn_that_reads_them_whole(place, watched):
    other, long_turn = watched
    answer = place.call("get_session_context", session=other.session.uri)
    assert [t["message"] for t in answer["turns"]] == ["working", "write a lot"]
    first, long_entry = answer["turns"]
    assert first["assistant"] == "first reply" and "assistantTruncated" not in first
    assert long_entry["assistantTruncated"] is True and long_entry["responseTurnId"] == str(long_turn.id)
    assert len(long_entry["assistant"]) == 280 and "toolCalls" not in long_entry
    assert answer["activeTurn"]["message"] == "still going" and answer["hasOlderTurns"] is False
    assert answer["status"] == "inProgress"


def test_older_turns_are_announced(place, watched):
    other, _ = watched
    answer = place.call("get_session_context", session=other.session.uri, transcriptLimit=1)
    assert [t["message"] for t in answer["turns"]] == ["write a lot"] and answer["hasOlderTurns"] is True


def test_digest_and_full_list_tool_calls(place, watched):
    other, _ = watched
    digest = place.call("get_session_context", session=other.session.uri, detail="digest")
    assert digest["activeTurn"]["toolCalls"] == [
        {"name": "list_sessions", "status": "completed", "ok": True},
        {"name": "delete_session", "status": "failed", "error": "e" * 200}]
    assert len(digest["turns"][1]["assistant"]) == 2000
    full = place.call("get_session_context", session=other.session.uri, detail="full")
    assert full["activeTurn"]["toolCalls"][0]["input"] == {"a": 1}


def test_a_long_reply_reads_in_pages(place, watched):
    other, long_turn = watched
    first = place.call("get_session_context", session=other.session.uri, responseTurnId=str(long_turn.id))
    assert (len(first["response"]), first["responseLength"], first["nextResponseOffset"], first["truncated"]) == (
        8000, 20000, 8000, True)
    last = place.call("get_session_context", session=other.session.uri, responseTurnId=str(long_turn.id),
                      responseOffset=16000)
    assert len(last["response"]) == 4000 and last["truncated"] is False and "nextResponseOffset" not in last


def test_messages_sent_by_me_are_listed(place, watched):
    other, _ = watched
    place.call("send_message", session=other.session.uri, message="when you are free")
    mine = place.call("get_session_context", session=other.session.uri)["messagesSentByMe"]
    assert [(m["delivery"], m["status"], m["message"], m["revision"]) for m in mine] == [
        ("queue", "pending", "when you are free", 1)]


def test_a_sessionless_call_must_name_a_session(acme):
    from tools_app.catalog.host_tools import REGISTRY
    from tools_app.catalog.loader import catalog_for_chat  # noqa: F401  (the door validates the same schema)
    from tools_app.families.session.api import input_error

    assert input_error(REGISTRY.get("get_session_context"), {}) == (
        "Invalid input for get_session_context at /: 'session' is a required property")


def test_an_unknown_session_is_not_found(place):
    with pytest.raises(Refused) as refused:
        place.call("get_session_context", session="ahp-session:/00000000-0000-0000-0000-000000000000")
    assert refused.value.sentence == (
        "No session or chat ahp-session:/00000000-0000-0000-0000-000000000000 that you may read.")


def test_a_chat_on_another_agent_names_its_harness(place, worktree_agent):
    created = place.call("create_chat", title="Other agent", agent=worktree_agent)
    answer = place.call("get_session_context", session=created["openLink"])
    assert answer["chat"] == created["chat"] and answer["harness"] == worktree_agent
    assert "harness" not in place.call("get_session_context", session=place.session.uri)
