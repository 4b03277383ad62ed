"""Chats a tool makes are that tool call's worker chats, over real sockets: what only chats a
person started may use is offered in the calling chat and not in the worker chat."""
import json
import time

from .harness import default_chat
from .test_client_tools import OPEN_FILE, announce, setup

PICK = {"name": "pick", "description": "Pick a file", "availability": "userChats", "inputSchema": {"type": "object"}}


def finished_turn(client, chat_uri, timeout=20):
    """The chat's last turn once it completed, read from fresh snapshots."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = client.subscribe(chat_uri)
        if state["turns"] and state["turns"][-1].get("state") != "inProgress" and not state.get("activeTurn"):
            return state["turns"][-1]
        time.sleep(0.1)
    raise AssertionError(f"{chat_uri} has no finished turn within {timeout}s")


def test_a_tool_made_chat_is_the_calling_calls_worker_and_is_not_offered_user_chat_tools(acme, host):
    alice, ide, session, chat = setup(host, acme)
    with alice, ide:
        announce(ide, session, OPEN_FILE, PICK)
        assert "ide__pick" in alice.reply_to(alice.start_turn(chat, "/tools")).split("\n")
        spawn = {"relationship": "currentSession", "title": "Worker", "prompt": "/call ide__pick {}"}
        turn = alice.start_turn(chat, f"/call create_session {json.dumps(spawn)}")
        call = alice.action("chat/toolCallStart", turnId=turn)["action"]
        worker = json.loads(alice.reply_to(turn))["chat"]

        summary = next(c for c in alice.subscribe(session)["chats"] if c["resource"] == worker)
        assert summary["origin"] == {"kind": "tool", "chat": chat, "toolCallId": call["toolCallId"]}

        # The call the worker's model made anyway is failed by the host: no client is named or asked.
        part = finished_turn(alice, worker)["responseParts"][0]["toolCall"]
        assert "contributor" not in part
        assert part["error"]["message"] == (
            "ide__pick is only available in chats a person started, not in this tool-started chat.")
        assert not [n for n in ide.notifications if n.get("method") == "action"
                    and n["params"]["action"]["type"] in ("session/inputNeededSet", "chat/toolCallStart")]

        offered = alice.reply_to(alice.start_turn(worker, "/tools")).split("\n")
        assert "ide__open_file" in offered and "ide__pick" not in offered
        assert "create_session" in offered
        server_tools = [t["name"] for t in alice.subscribe(session)["serverTools"]]
        assert "ide__pick" not in server_tools and "ide__open_file" not in server_tools


def test_a_create_chat_chat_is_a_worker_chat_too(acme, host):
    alice, ide, session, chat = setup(host, acme)
    with alice, ide:
        announce(ide, session, OPEN_FILE, PICK)
        turn = alice.start_turn(chat, '/call create_chat {"title": "Side work"}')
        call = alice.action("chat/toolCallStart", turnId=turn)["action"]
        worker = json.loads(alice.reply_to(turn))["chat"]
        summary = next(c for c in alice.subscribe(session)["chats"] if c["resource"] == worker)
        assert summary["origin"] == {"kind": "tool", "chat": chat, "toolCallId": call["toolCallId"]}
        alice.subscribe(worker)
        assert "ide__pick" not in alice.reply_to(alice.start_turn(worker, "/tools")).split("\n")


def test_a_client_tool_with_an_unknown_availability_is_not_offered(acme, host):
    alice, ide, session, chat = setup(host, acme)
    with alice, ide:
        announce(ide, session, OPEN_FILE, {**PICK, "availability": "everywhere"})
        offered = alice.reply_to(alice.start_turn(chat, "/tools")).split("\n")
        assert "ide__open_file" in offered and "ide__pick" not in offered
        assert default_chat(alice, session) == chat
