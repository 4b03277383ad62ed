"""The `echo` provider: a deterministic agent."""
import json
import uuid
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tools_app.runtime.toolbox import ChatToolbox

    from ..registry import AgentInfo, ModelInfo


class EchoProvider:
    """A deterministic agent, so every tool path can be driven without a model.

    `/tools` lists the tools it is offered; each line `/call <tool> <json>` calls that tool
    through the chat's catalog snapshot and puts the result's text in the reply; anything else
    is echoed back.
    """

    id = "echo"
    display_name = "Echo"
    description = "Echoes messages; /tools lists its tools and /call <tool> <json> calls one."
    models: tuple["ModelInfo", ...] = ({"id": "echo-1", "provider": "echo", "name": "Echo"},)

    def agent_info(self) -> "AgentInfo":
        return {"provider": self.id, "displayName": self.display_name, "description": self.description,
                "models": list(self.models)}

    async def cancel(self, session_id: uuid.UUID) -> None:
        """Nothing to interrupt: an echo answers at once, and a client call it waits on ends
        with the turn."""

    async def run_turn(self, text: str, toolbox: "ChatToolbox") -> str:
        if text.strip() == "/tools":
            return "\n".join(await toolbox.names())
        lines = text.splitlines()
        if not any(line.startswith("/call ") for line in lines):
            return text
        replies = []
        for line in lines:
            if not line.startswith("/call "):
                replies.append(line)
                continue
            name, _, raw = line[len("/call "):].strip().partition(" ")
            try:
                arguments = json.loads(raw) if raw.strip() else {}
            except json.JSONDecodeError as exc:
                replies.append(f"/call {name}: the input is not JSON ({exc.msg}).")
                continue
            replies.append(await toolbox.call(name, arguments))
        return "\n".join(replies)

