"""Tools a client announces and runs itself, end to end over real sockets."""
import time
import uuid

from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from sessions_app.models import ActiveClient, Chat, Session
from sessions_app.tasks import sweep_due_work
from tools_app.runtime import waker
from tools_app.runtime.toolbox import ChatToolbox

from .harness import AhpClient, default_chat, set_config

OPEN_FILE = {"name": "open_file", "description": "Open a file in the editor",
             "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}}}


def announce(client, session_uri, *tools):
    client.subscribe(session_uri)
    client.dispatch(session_uri, {"type": "session/activeClientSet",
                                  "activeClient": {"clientId": client.client_id, "tools": list(tools) or [OPEN_FILE]}})
    client.action("session/activeClientSet")


def setup(host, people, timeout_ms=None, disconnect_ms=None):
    """Alice drives the agent; the IDE client runs the tool."""
    config = {}
    if timeout_ms is not None:
        config["clientToolTimeoutMs"] = timeout_ms
    if disconnect_ms is not None:
        config["clientToolCallDisconnectTimeoutMs"] = disconnect_ms
    if config:
        set_config(host.port, people.tokens["root"], **config)
    alice = AhpClient(host.port, people.tokens["member"], "alice")
    ide = AhpClient(host.port, people.tokens["member"], "ide")
    session = alice.create_session()
    chat = default_chat(alice, session)
    alice.subscribe(chat)
    announce(ide, session)
    return alice, ide, session, chat


def call_open_file(alice, chat):
    turn = alice.start_turn(chat, '/call ide__open_file {"path": "README.md"}')
    start = alice.action("chat/toolCallStart", turnId=turn)["action"]
    return turn, start


def complete(client, chat, turn, call_id, text="opened", success=True):
    client.dispatch(chat, {"type": "chat/toolCallComplete", "turnId": turn, "toolCallId": call_id,
                           "result": {"success": success, "pastTenseMessage": "Opened the file",
                                      "content": [{"type": "text", "text": text}]}})


def test_a_clients_answer_wakes_the_waiting_agent_at_once(acme, host, monkeypatch):
    """The completion hands the result to the process whose agent waits (the call names its
    channel): the agent never needs its fallback, a read of the call's row, here put off for a
    minute."""
    monkeypatch.setattr(waker, "RECOVER_SECONDS", 60)
    alice, ide, session, chat = setup(host, acme)
    with alice, ide:
        for _ in range(3):
            turn, start = call_open_file(alice, chat)
            request = ide.action("session/inputNeededSet")["action"]["request"]
            answered = time.monotonic()
            complete(ide, chat, turn, request["toolCall"]["toolCallId"])
            assert alice.reply_to(turn) == "opened"
            assert time.monotonic() - answered < 30


def test_the_waiting_calls_of_a_process_are_read_in_one_statement(acme, host):
    """However many calls a process's agents wait on, finding which ended (or went with their
    session) is one read."""
    alice, ide, session, chat = setup(host, acme)
    with alice, ide:
        turn, start = call_open_file(alice, chat)
        waiting = start["toolCallId"]
        gone = [str(uuid.uuid4()) for _ in range(200)]
        with CaptureQueriesContext(connection) as captured:
            ended = waker.ended_calls([waiting, *gone])
        assert len(captured) == 1 and set(ended) == set(gone)
        assert ended[gone[0]]["error"]["message"] == waker.CALL_GONE
        complete(ide, chat, turn, waiting)
        assert alice.reply_to(turn) == "opened"
        assert waker.ended_calls([waiting])[waiting]["content"][0]["text"] == "opened"


def test_announced_tools_join_the_catalog_under_the_client_id(acme, host):
    alice, ide, session, chat = setup(host, acme)
    with alice, ide:
        assert "ide__open_file" in alice.reply_to(alice.start_turn(chat, "/tools")).split("\n")
        state = alice.subscribe(session)
        assert state["activeClients"] == [{"clientId": "ide", "tools": [OPEN_FILE]}]


def test_a_client_tool_call_round_trip(acme, host):
    alice, ide, session, chat = setup(host, acme)
    with alice, ide:
        turn, start = call_open_file(alice, chat)
        # Drawn under the name the client announced; the model called ide__open_file.
        assert (start["toolName"], start["displayName"]) == ("open_file", "open_file")
        assert start["contributor"] == {"kind": "client", "clientId": "ide"}
        ready = alice.action("chat/toolCallReady", toolCallId=start["toolCallId"])["action"]
        assert ready["confirmed"] == "not-needed" and ready["contributor"] == {"kind": "client", "clientId": "ide"}
        request = ide.action("session/inputNeededSet")["action"]["request"]
        assert (request["kind"], request["clientId"], request["chat"]) == ("toolClientExecution", "ide", chat)
        # In progress, not input-needed: a client's execution awaits no person (the protocol's awaitsUser).
        assert Session.objects.get(id=session.split("/")[-1]).status == Session.IN_PROGRESS
        complete(ide, chat, turn, request["toolCall"]["toolCallId"])
        assert ide.action("session/inputNeededRemoved")["action"]["id"] == start["toolCallId"]
        done = alice.action("chat/toolCallComplete", toolCallId=start["toolCallId"])
        assert done["origin"]["clientId"] == "ide"
        assert alice.reply_to(turn) == "opened"


def test_an_agent_whose_wake_up_is_lost_reads_the_result_from_the_row(acme, host, monkeypatch):
    """The channel layer lost the completion's wake-up (a full channel, a Redis blip): the waiting
    agent still has the result from its process's next read of its waiting calls' rows (each
    second), long before the deadline."""
    from sessions_app.actions import tool_calls

    alice, ide, session, chat = setup(host, acme)
    with alice, ide:
        turn, start = call_open_file(alice, chat)
        request = ide.action("session/inputNeededSet")["action"]["request"]
        monkeypatch.setattr(tool_calls, "wake", lambda channel, call_id, result: None)
        began = time.monotonic()
        complete(ide, chat, turn, request["toolCall"]["toolCallId"], text="read from the row")
        assert alice.reply_to(turn) == "read from the row"
        assert time.monotonic() - began < 5


def test_a_call_still_beginning_is_not_taken_for_one_removed_with_its_session(acme, host, monkeypatch):
    """The process reads its waiting calls' rows while a call's begin has not committed yet (its
    hop queued behind others under load): the missing row is not yet written, not gone, and the
    agent gets the client's answer, not `The tool call was removed with its session.`"""
    monkeypatch.setattr(waker, "RECOVER_SECONDS", 0.05)
    begin = ChatToolbox.begin_client_call

    def slow_begin(toolbox, *args):
        time.sleep(1.5)  # several rounds of the reading pass meanwhile
        return begin(toolbox, *args)

    monkeypatch.setattr(ChatToolbox, "begin_client_call", slow_begin)
    alice, ide, session, chat = setup(host, acme)
    with alice, ide:
        turn, start = call_open_file(alice, chat)
        complete(ide, chat, turn, start["toolCallId"])
        assert alice.reply_to(turn) == "opened"


def test_only_the_owning_client_may_complete_and_only_once(acme, host):
    alice, ide, session, chat = setup(host, acme)
    with alice, ide:
        turn, start = call_open_file(alice, chat)
        call_id = start["toolCallId"]
        complete(alice, chat, turn, call_id, text="forged")
        rejected = alice.action("chat/toolCallComplete", rejected=True, toolCallId=call_id)
        assert rejected["rejectionReason"] == f"Tool call {call_id} belongs to ide, not alice."
        complete(ide, chat, turn, call_id, text="first")
        assert alice.reply_to(turn) == "first"
        complete(ide, chat, turn, call_id, text="second")
        again = ide.action("chat/toolCallComplete", rejected=True, toolCallId=call_id)
        assert again["rejectionReason"] == f"Tool call {call_id} is already complete."
        last = alice.subscribe(chat)["turns"][-1]["responseParts"][0]["toolCall"]
        assert last["content"] == [{"type": "text", "text": "first"}]


def test_a_guest_may_not_complete_a_tool_call(acme, host):
    alice, ide, session, chat = setup(host, acme)
    with alice, ide, AhpClient(host.port, acme.tokens["guest"], "ide") as guest_ide:
        turn, start = call_open_file(alice, chat)
        guest_ide.subscribe(chat)
        complete(guest_ide, chat, turn, start["toolCallId"])
        assert guest_ide.action("chat/toolCallComplete", rejected=True)["rejectionReason"] == "acme-guest may not chat:tool here"


def test_a_call_with_no_answer_fails_at_the_client_tool_timeout(acme, host):
    alice, ide, session, chat = setup(host, acme, timeout_ms=1000)
    with alice, ide:
        turn, start = call_open_file(alice, chat)
        assert alice.reply_to(turn) == "open_file got no answer from ide in 1 s"
        result = alice.subscribe(chat)["turns"][-1]["responseParts"][0]["toolCall"]
        assert result["success"] is False and result["pastTenseMessage"] == "open_file failed"


def test_a_vanished_client_with_no_grace_fails_its_calls_at_once(acme, host):
    alice, ide, session, chat = setup(host, acme, disconnect_ms=0)
    with alice:
        alice.subscribe(session)
        turn, start = call_open_file(alice, chat)
        ide.close()
        done = alice.action("chat/toolCallComplete", toolCallId=start["toolCallId"])["action"]["result"]
        assert done["success"] is False and done["pastTenseMessage"] == "open_file failed"
        assert done["error"]["message"] == "Client ide disconnected before completing open_file"
        assert alice.action("session/activeClientRemoved")["action"]["clientId"] == "ide"
        assert alice.reply_to(turn) == "Client ide disconnected before completing open_file"
        assert "ide__open_file" not in alice.reply_to(alice.start_turn(chat, "/tools"))


def test_a_client_back_within_the_grace_loses_nothing(acme, host):
    alice, ide, session, chat = setup(host, acme)
    with alice:
        turn, start = call_open_file(alice, chat)
        ide.close()
        time.sleep(0.3)
        with AhpClient(host.port, acme.tokens["member"], "ide") as back:
            back.subscribe(session)
            complete(back, chat, turn, start["toolCallId"], text="after a blip")
            assert alice.reply_to(turn) == "after a blip"


def test_when_the_grace_runs_out_the_model_is_told_another_client_has_the_tool(acme, host):
    alice, ide, session, chat = setup(host, acme, disconnect_ms=200)
    with alice, AhpClient(host.port, acme.tokens["member"], "cli") as cli:
        announce(cli, session)
        turn, start = call_open_file(alice, chat)
        ide.close()
        # The server closes the socket's row when it gets to it (late on a loaded machine); the
        # 200 ms grace runs from then.
        deadline = time.monotonic() + 20
        while not ActiveClient.objects.filter(client_id="ide", release_at__lte=timezone.now()).exists():
            assert time.monotonic() < deadline, "the server never closed ide's connection"
            time.sleep(0.05)
        sweep_due_work()
        assert alice.reply_to(turn) == (
            "Client ide disconnected before completing open_file. Client cli provides the same tool as "
            "cli__open_file; you may try the call again with it."
        )


def test_unsubscribing_from_the_session_releases_the_client_at_once(acme, host):
    alice, ide, session, chat = setup(host, acme)
    with alice, ide:
        turn, start = call_open_file(alice, chat)
        ide.call("unsubscribe", {"channel": session})
        assert alice.reply_to(turn) == "Client ide disconnected before completing open_file"


def test_a_user_chats_tool_called_in_a_tool_started_chat_is_failed_by_the_host(acme, host):
    pick = {"name": "pick", "availability": "userChats", "inputSchema": {"type": "object"}}
    alice, ide, session, chat = setup(host, acme)
    with alice, ide:
        announce(ide, session, OPEN_FILE, pick)
        main = Chat.objects.get(id=chat.split("/")[-1])
        worker = Chat.objects.create(session=main.session, origin_kind="tool", origin_chat=main,
                                     origin_tool_call_id="spawner")
        worker_uri = f"ahp-chat:/{worker.id}"
        alice.subscribe(worker_uri)
        tools = alice.reply_to(alice.start_turn(worker_uri, "/tools")).split("\n")
        assert "ide__open_file" in tools and "ide__pick" not in tools
        turn = alice.start_turn(worker_uri, "/call ide__pick {}")
        start = alice.action("chat/toolCallStart", turnId=turn)["action"]
        assert "contributor" not in start
        result = alice.action("chat/toolCallComplete", turnId=turn)["action"]["result"]
        assert result["error"]["message"] == (
            "ide__pick is only available in chats a person started, not in this tool-started chat."
        )
        assert not [n for n in ide.notifications if n["params"]["action"]["type"] == "session/inputNeededSet"]


def test_a_completion_in_another_chat_of_the_session_finds_no_call(acme, host):
    alice, ide, session, chat = setup(host, acme)
    with alice, ide:
        turn, start = call_open_file(alice, chat)
        call_id = start["toolCallId"]
        other = f"ahp-chat:/{uuid.uuid4()}"
        alice.call("createChat", {"channel": session, "chat": other})
        ide.subscribe(other)
        complete(ide, other, turn, call_id, text="misplaced")
        rejected = ide.action("chat/toolCallComplete", rejected=True, toolCallId=call_id)
        assert rejected["rejectionReason"] == f"No tool call {call_id} in turn {turn} of this chat."
        complete(ide, chat, turn, call_id, text="in its own chat")
        assert alice.reply_to(turn) == "in its own chat"
