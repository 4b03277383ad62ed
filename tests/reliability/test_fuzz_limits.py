"""Size limits wherever a peer controls the size: tool inputs (one limit, refused before any
tool runs), client tool results (cut like a host tool's), and message text (turnStarted,
createChat's initialMessage, send_message, schedule_wakeup: one limit, one sentence)."""
import asyncio
import json
import uuid

from sessions_app.actions import MAX_MESSAGE_CHARS, do_create_session
from sessions_app.models import ToolCall, Turn
from tools_app.catalog.bounding import MAX_OUTPUT_BYTES
from tools_app.catalog.validation import MAX_INPUT_BYTES
from tools_app.models import FullToolOutput
from tools_app.runtime.toolbox import ChatToolbox

from ..ahp.protocol.harness import AhpClient, RpcFailed, default_chat
from ..ahp.protocol.test_client_tools import call_open_file, complete, setup

MESSAGE_LIMIT = f"A message is a string of at most {MAX_MESSAGE_CHARS} characters."


def member_turn(people, text="go"):
    session = do_create_session(people.principal("member"), uuid.uuid4())
    turn = Turn.objects.create(chat=session.chats.get(is_default=True), sender=people.member, text=text)
    return Turn.objects.select_related("chat__session__tenant", "sender").get(pk=turn.pk)


def run(turn, name, arguments):
    toolbox = ChatToolbox(turn)
    return asyncio.run(toolbox.execute(asyncio.run(toolbox.snapshot()), name, arguments))


def test_a_tool_input_over_the_limit_is_refused_before_the_tool_runs_and_is_not_kept(acme, transactional_db):
    turn = member_turn(acme)
    result = run(turn, "list_sessions", {"workspace": "x" * MAX_INPUT_BYTES})
    assert result["error"]["message"] == f"Input for list_sessions refused: over {MAX_INPUT_BYTES} bytes as JSON."
    assert ToolCall.objects.get(turn=turn).input == {}
    assert run(turn, "list_sessions", {"workspace": "x" * (MAX_INPUT_BYTES - 100)})["success"] is True


def test_a_tool_input_holding_nul_or_a_lone_surrogate_is_refused_and_not_kept(acme, transactional_db):
    turn = member_turn(acme)
    for text in ("a\x00b", "a\ud800b"):
        result = run(turn, "list_sessions", {"workspace": text})
        assert result["error"]["message"] == (
            "Invalid input for list_sessions: strings may not hold NUL characters or lone surrogates.")
    assert list(ToolCall.objects.filter(turn=turn).values_list("input", flat=True)) == [{}, {}]
    assert run(turn, "list_sessions", {"workspace": "emoji \U0001F600 and \\u0000 typed out"})["success"] is True


def test_a_turn_started_with_text_over_the_limit_is_rejected(acme, host):
    with AhpClient(host.port, acme.tokens["member"]) as alice:
        chat = default_chat(alice, alice.create_session())
        alice.subscribe(chat)
        alice.start_turn(chat, "x" * (MAX_MESSAGE_CHARS + 1))
        assert alice.action("chat/turnStarted", rejected=True)["rejectionReason"] == MESSAGE_LIMIT
        session = alice.create_session()
        try:
            alice.call("createChat", {"channel": session, "chat": f"ahp-chat:/{uuid.uuid4()}",
                                      "initialMessage": {"text": "x" * (MAX_MESSAGE_CHARS + 1)}})
        except RpcFailed as failed:
            assert (failed.code, failed.message) == (-32602, MESSAGE_LIMIT)
        else:
            raise AssertionError("createChat took an initial message over the limit")
        turn = alice.start_turn(chat, "x" * MAX_MESSAGE_CHARS)
        assert len(alice.reply_to(turn)) == MAX_MESSAGE_CHARS


def test_tools_that_send_messages_refuse_text_over_the_limit(acme, transactional_db, workspace):
    turn = member_turn(acme)
    target = do_create_session(acme.principal("member"), uuid.uuid4())
    too_long = "x" * (MAX_MESSAGE_CHARS + 1)
    assert run(turn, "send_message", {"session": target.uri, "message": too_long})["error"]["message"] == MESSAGE_LIMIT
    assert run(turn, "schedule_wakeup", {"delaySeconds": 60, "prompt": too_long})["error"]["message"] == MESSAGE_LIMIT
    created = run(turn, "create_session", {"relationship": "independent", "prompt": too_long, "title": "t",
                                           "workspace": str(workspace)})
    assert created["error"]["message"] == MESSAGE_LIMIT
    assert not Turn.objects.filter(text=too_long).exists()


def test_a_client_tool_result_is_cut_like_a_host_tools(acme, host):
    alice, ide, session, chat = setup(host, acme)
    with alice, ide:
        turn, start = call_open_file(alice, chat)
        complete(ide, chat, turn, start["toolCallId"], text="y" * (MAX_OUTPUT_BYTES * 3))
        done = alice.action("chat/toolCallComplete", toolCallId=start["toolCallId"])["action"]
        text = done["result"]["content"][0]["text"]
        assert len(text.encode()) < MAX_OUTPUT_BYTES + 300
        assert f"The full output is at ahp-tool-output:/{start['toolCallId']}." in text
        assert len(alice.reply_to(turn)) < MAX_OUTPUT_BYTES + 300
    assert FullToolOutput.objects.get(call_id=start["toolCallId"]).text == "y" * (MAX_OUTPUT_BYTES * 3)


def test_a_client_result_whose_content_is_not_content_items_is_rejected(acme, host):
    alice, ide, session, chat = setup(host, acme)
    with alice, ide:
        turn, start = call_open_file(alice, chat)
        ide.subscribe(chat)
        ide.dispatch(chat, {"type": "chat/toolCallComplete", "turnId": turn, "toolCallId": start["toolCallId"],
                            "result": {"success": True, "pastTenseMessage": "ok", "content": ["not", "items"]}})
        assert ide.action("chat/toolCallComplete", rejected=True)["rejectionReason"] == (
            "result.content must be an array of content items; a text item's text is a string.")
        complete(ide, chat, turn, start["toolCallId"], text=json.dumps({"still": "answerable"}))
        assert alice.reply_to(turn) == '{"still": "answerable"}'
