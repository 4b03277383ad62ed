"""A client completes a call after its timeout: the second completion is rejected and the
timeout, the call's first result, stands (completing twice: tests/ahp/protocol/test_client_tools.py)."""
import time
import uuid

from sessions_app import actions
from sessions_app.models import Chat, ToolCall, Turn

from ..ahp.protocol.harness import AhpClient, default_chat
from ..ahp.protocol.test_client_tools import announce, complete, setup
from .fault_helpers import completions_per_call


def test_a_completion_after_the_timeout_fired_is_rejected_and_the_timeout_stands(acme, host):
    alice, ide, session, chat = setup(host, acme, timeout_ms=1000)
    with alice, ide:
        turn = alice.start_turn(chat, '/call ide__open_file {"path": "README.md"}')
        call_id = alice.action("chat/toolCallStart", turnId=turn)["action"]["toolCallId"]
        assert alice.reply_to(turn) == "open_file got no answer from ide in 1 s"
        complete(ide, chat, turn, call_id, text="too late")
        late = ide.action("chat/toolCallComplete", rejected=True, toolCallId=call_id)
        assert late["rejectionReason"] == f"Tool call {call_id} is already complete."
        stands = alice.subscribe(chat)["turns"][-1]["responseParts"][0]["toolCall"]
        assert stands["success"] is False and stands["error"]["message"] == "open_file got no answer from ide in 1 s"
    assert completions_per_call() == {call_id: 1}


def test_a_completion_after_the_deadline_is_rejected_even_before_anyone_expired_the_call(acme, host):
    """Nobody has expired the call yet (its agent's process is gone and the sweep has not run):
    the deadline alone decides, so the late result cannot win the race."""
    with AhpClient(host.port, acme.tokens["member"], "ide") as ide:
        session_uri = ide.create_session()
        chat_uri = default_chat(ide, session_uri)
        announce(ide, session_uri)
        ide.subscribe(chat_uri)
        chat = Chat.objects.get(id=chat_uri.split("/")[-1])
        turn = actions.do_start_turn(acme.principal("member"), chat, uuid.uuid4(), "open it")
        call = actions.do_begin_tool_call(Turn.objects.get(id=turn.id), "open_file", {"path": "README.md"},
                                          client_id="ide", timeout_ms=50)
        time.sleep(0.1)
        complete(ide, chat_uri, str(turn.id), str(call.id), text="too late")
        late = ide.action("chat/toolCallComplete", rejected=True, toolCallId=str(call.id))
        assert late["rejectionReason"] == f"Tool call {call.id} timed out before this result came."
        expired = ide.action("chat/toolCallComplete", toolCallId=str(call.id))["action"]["result"]
        assert expired["error"]["message"] == "open_file got no answer from ide in 0.05 s"
    assert ToolCall.objects.get(id=call.id).result == expired
    assert completions_per_call() == {str(call.id): 1}
