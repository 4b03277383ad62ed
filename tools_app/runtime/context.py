"""What a host tool's executor is handed, and the shape of what it answers."""
from dataclasses import dataclass
from typing import Any

from grants.models import Principal
from sessions_app.models import Chat, Session, Turn

# A ToolCallResult as the wire carries it: success, pastTenseMessage, content, error.
ToolResult = dict[str, Any]


@dataclass(frozen=True)
class ToolCallContext:
    """What a host tool's executor is handed: who calls, from where."""

    principal: Principal
    session: Session | None
    chat: Chat | None
    turn: Turn | None
    tool_call_id: str


def as_result(tool_name: str, value: Any) -> ToolResult:
    """A host executor may answer text or a ToolCallResult-shaped dict."""
    if isinstance(value, dict) and "success" in value:
        return value
    return {"success": True, "pastTenseMessage": f"Ran {tool_name}", "content": [{"type": "text", "text": str(value)}]}
