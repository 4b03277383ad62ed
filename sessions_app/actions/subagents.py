"""A harness's own sub-agent (Claude's Agent tool): the call that starts it shows in the calling
chat, and the sub-agent works in a chat of its own whose origin is that call (kind `tool`), so
it is offered the tool-origin catalog (no userChats tools) and its tool calls show there."""
import uuid
from typing import Any

from django.db import transaction

from grants.models import Principal

from ..models import ToolCall, Turn
from .chats import do_create_chat
from .tool_calls import do_begin_tool_call, do_complete_tool_call, failure
from .turns import begin_turn, do_end_turn


@transaction.atomic
def do_start_subagent(principal: Principal, turn: Turn, tool_name: str, arguments: dict[str, Any], title: str,
                      prompt: str) -> tuple[ToolCall, Turn]:
    """The sub-agent's call in `turn`'s chat, its worker chat, and the turn it works in there."""
    call = do_begin_tool_call(turn, tool_name, arguments, display_name=title)
    chat = do_create_chat(principal, turn.chat.session, uuid.uuid4(), title,
                          {"kind": "tool", "chat_id": turn.chat_id, "tool_call_id": str(call.id)})
    return call, begin_turn(chat, uuid.uuid4(), prompt, principal.person, origin_kind="tool")


@transaction.atomic
def do_end_subagent(call_id: uuid.UUID | str, turn_id: uuid.UUID | str, report: str, failed: bool) -> None:
    """The sub-agent answered (or stopped): its turn and the call that started it end with its report."""
    if failed:
        do_end_turn(turn_id, error=report)
        do_complete_tool_call(call_id, failure("sub-agent", report))
    else:
        do_end_turn(turn_id, response_text=report)
        do_complete_tool_call(call_id, {"success": True, "pastTenseMessage": "The sub-agent answered",
                                        "content": [{"type": "text", "text": report}]})
