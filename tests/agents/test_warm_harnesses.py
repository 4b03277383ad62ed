"""A chat's harness stays warm between its turns (agents/warm.py): the real Claude Code CLI in the
session's sandbox, against the scripted model, over a real socket."""
import asyncio
import time

import pytest

from agents.warm import WARM

from ..ahp.protocol.harness import AhpClient, default_chat
from ..ahp.protocol.test_client_tools import announce, complete
from .model_server import Text, use_tool
from .test_claude_provider import harness_pids, needs_cli

pytestmark = [pytest.mark.e2e, needs_cli]


def stop_warm():
    """What a restarted process has: no warm harness."""
    asyncio.run_coroutine_threadsafe(WARM.stop_all(), WARM.loop).result(60)


def wait_for(condition, seconds):
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.05)
    return condition()


def chat_id(chat_uri):
    return chat_uri.split("/")[-1]


def test_two_turns_of_a_chat_go_to_one_claude_process_holding_the_conversation(acme, host, model):
    model.add(Text("first answer"), Text("second answer"))
    with AhpClient(host.port, acme.tokens["member"]) as alice:
        session = alice.create_session(provider="claude")
        chat = default_chat(alice, session)
        alice.subscribe(chat)
        assert alice.reply_to(alice.start_turn(chat, "remember 17"), timeout=90) == "first answer"
        first_pids = harness_pids(session)
        assert len(first_pids) == 1  # still running between the turns
        assert alice.reply_to(alice.start_turn(chat, "what was it?"), timeout=90) == "second answer"
        assert harness_pids(session) == first_pids
    first, second = model.agent_requests()
    assert second.last_user_text() == "what was it?"
    assert "remember 17" in str(second.body["messages"]) and "first answer" in str(second.body["messages"])


def test_after_warm_turns_a_restarted_process_resumes_the_conversation_with_every_turn(acme, host, model):
    model.add(Text("first answer"), Text("second answer"), Text("third answer"))
    with AhpClient(host.port, acme.tokens["member"]) as alice:
        session = alice.create_session(provider="claude")
        chat = default_chat(alice, session)
        alice.subscribe(chat)
        assert alice.reply_to(alice.start_turn(chat, "remember 17"), timeout=90) == "first answer"
        assert alice.reply_to(alice.start_turn(chat, "and 23"), timeout=90) == "second answer"
        stop_warm()
        assert alice.reply_to(alice.start_turn(chat, "what were they?"), timeout=90) == "third answer"
    third = str(model.agent_requests()[2].body["messages"])
    assert all(said in third for said in ("remember 17", "first answer", "and 23", "second answer"))


def test_a_changed_catalog_between_turns_reaches_the_model_and_the_conversation_goes_on(acme, host, model):
    model.add(Text("first answer"), Text("second answer"))
    with AhpClient(host.port, acme.tokens["member"], "alice") as alice, \
            AhpClient(host.port, acme.tokens["member"], "ide") as ide:
        session = alice.create_session(provider="claude")
        chat = default_chat(alice, session)
        alice.subscribe(chat)
        assert alice.reply_to(alice.start_turn(chat, "remember 17"), timeout=90) == "first answer"
        announce(ide, session)  # a client brings a tool: the catalog changed
        assert alice.reply_to(alice.start_turn(chat, "what was it?"), timeout=90) == "second answer"
    first, second = model.agent_requests()
    assert "mcp__client__ide__open_file" not in first.tool_names
    # A tool new to a resumed conversation the CLI offers through its tool search (deferred).
    assert "mcp__client__ide__open_file" in [tool["name"] for tool in second.tools]
    assert "remember 17" in str(second.body["messages"]) and "first answer" in str(second.body["messages"])


def test_cancelling_a_warm_turn_stops_it_at_once_and_the_same_process_answers_the_next(acme, host, model):
    def by_prompt(request):
        # The cancelled call's result may reach the CLI before its interrupt does: it asks once more.
        return Text("answered after the cancel" if request.last_user_text() == "again" else "too late")

    model.add(Text("first answer"), use_tool("ide__open_file", {"path": "README.md"}), by_prompt, by_prompt)
    with AhpClient(host.port, acme.tokens["member"], "alice") as alice, \
            AhpClient(host.port, acme.tokens["member"], "ide") as ide:
        session = alice.create_session(provider="claude")
        chat = default_chat(alice, session)
        alice.subscribe(chat)
        announce(ide, session)
        assert alice.reply_to(alice.start_turn(chat, "hello"), timeout=90) == "first answer"
        pids = harness_pids(session)
        turn = alice.start_turn(chat, "open the readme")
        request = ide.action("session/inputNeededSet", timeout=90)["action"]["request"]
        alice.dispatch(chat, {"type": "chat/turnCancelled", "turnId": turn})
        alice.action("chat/turnCancelled", turnId=turn, timeout=30)
        # The CLI ended its turn and is warm again, for this chat.
        assert wait_for(lambda: ("claude", chat_id(chat)) in WARM.chats(), 2)
        assert harness_pids(session) == pids
        assert alice.reply_to(alice.start_turn(chat, "again"), timeout=90) == "answered after the cancel"
        assert harness_pids(session) == pids
        complete(ide, chat, turn, request["toolCall"]["toolCallId"], text="too late")


def test_an_idle_harness_stops_and_the_next_turn_resumes_the_conversation(acme, host, model, settings):
    settings.AHP_HARNESS_IDLE_SECONDS = 1
    model.add(Text("first answer"), Text("second answer"))
    with AhpClient(host.port, acme.tokens["member"]) as alice:
        session = alice.create_session(provider="claude")
        chat = default_chat(alice, session)
        alice.subscribe(chat)
        assert alice.reply_to(alice.start_turn(chat, "remember 17"), timeout=90) == "first answer"
        assert wait_for(lambda: not harness_pids(session), 30)
        assert alice.reply_to(alice.start_turn(chat, "what was it?"), timeout=90) == "second answer"
    second = model.agent_requests()[1]
    assert "remember 17" in str(second.body["messages"]) and "first answer" in str(second.body["messages"])


def test_the_nodes_cap_stops_the_least_recently_used_chats_harness(acme, host, model, settings):
    settings.AHP_HARNESS_WARM_MAX = 2
    model.add(Text("one"), Text("two"), Text("three"), Text("one again"))
    with AhpClient(host.port, acme.tokens["member"]) as alice:
        sessions = [alice.create_session(provider="claude") for _ in range(3)]
        chats = [default_chat(alice, session) for session in sessions]
        for chat, text in zip(chats, ("one", "two", "three"), strict=True):
            alice.subscribe(chat)
            assert alice.reply_to(alice.start_turn(chat, text), timeout=90) == text
        assert wait_for(lambda: not harness_pids(sessions[0]), 30)
        assert [len(harness_pids(session)) for session in sessions] == [0, 1, 1]
        assert WARM.chats() == [("claude", chat_id(chats[1])), ("claude", chat_id(chats[2]))]
        # Its next turn starts cold, resumes its conversation, and the least recent goes in turn.
        assert alice.reply_to(alice.start_turn(chats[0], "and again"), timeout=90) == "one again"
        assert WARM.chats() == [("claude", chat_id(chats[2])), ("claude", chat_id(chats[0]))]
    assert "one" in str(model.agent_requests()[-1].body["messages"][0])


def test_harnesses_over_the_nodes_memory_bound_stop_after_their_turn(acme, host, model, settings):
    settings.AHP_HARNESS_WARM_MEMORY_MB = 1
    model.add(Text("done"))
    with AhpClient(host.port, acme.tokens["member"]) as alice:
        session = alice.create_session(provider="claude")
        chat = default_chat(alice, session)
        alice.subscribe(chat)
        assert alice.reply_to(alice.start_turn(chat, "hi"), timeout=90) == "done"
        assert wait_for(lambda: not harness_pids(session), 30)
        assert WARM.chats() == []



def test_a_new_sessions_harness_starts_before_its_first_message_which_goes_to_it(acme, host, model):
    model.add(Text("first answer"))
    with AhpClient(host.port, acme.tokens["member"]) as alice:
        session = alice.create_session(provider="claude")
        assert wait_for(lambda: len(harness_pids(session)) == 1, 60)
        pids = harness_pids(session)
        chat = default_chat(alice, session)
        alice.subscribe(chat)
        assert alice.reply_to(alice.start_turn(chat, "hello"), timeout=90) == "first answer"
        assert harness_pids(session) == pids
