"""What one Copilot turn hands its CLI: the chat's tools as SDK custom tools, the sub-agents its
`task` calls start, the permission asker for the CLI's built-ins, and the reply as it streams."""
import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from copilot.generated.rpc import PermissionDecisionApproveOnce, PermissionDecisionReject
from copilot.generated.session_events import (
    AssistantMessageDeltaData,
    PermissionRequest,
    SessionEvent,
    SubagentStartedData,
    ToolExecutionCompleteData,
    ToolExecutionStartData,
)
from copilot.session import PermissionInvocation
from copilot.tools import Tool, ToolInvocation, ToolResult

from kernel.refusals import Refused

from ..harness import AgentConnection, builtin_permission

if TYPE_CHECKING:
    from tools_app.catalog.catalog import CatalogSnapshot
    from tools_app.runtime.toolbox import ChatToolbox

    from ..warm import CurrentTurn

TASK_TOOL = "task"
SUBAGENT_STOPPED = "The sub-agent stopped with the turn that started it."
UNATTRIBUTED = "The host could not tell which agent made this call, so it did not run."
ATTRIBUTION_SECONDS = 30  # how long a sub-agent's call waits for the event naming its task call

# A sub-agent's toolbox, the snapshot it is offered and the id of the host call that started it.
Subagent = tuple["ChatToolbox", "CatalogSnapshot", Any]
Permission = PermissionDecisionApproveOnce | PermissionDecisionReject


class Agents:
    """One turn's agents: the turn's own and each sub-agent a `task` call started, which works in a
    chat of its own (origin: that call) on the tool-origin catalog. The CLI names the sub-agent
    that makes a custom tool call (ToolInvocation.agent_id), and its SubagentStarted event the
    task call that runs it."""

    def __init__(self, toolbox: "ChatToolbox", snapshot: "CatalogSnapshot") -> None:
        self.toolbox, self.snapshot = toolbox, snapshot
        self.loop = asyncio.get_running_loop()
        self.subagents: dict[str, asyncio.Task[Subagent]] = {}  # a task call's id -> the opening of its sub-agent
        self.task_of: dict[str, str] = {}  # a sub-agent's id -> its task call's id
        self.noted = asyncio.Condition()

    def take(self, event: SessionEvent) -> None:
        """An SDK event (its handlers are synchronous): noted on the turn's loop."""
        self.loop.call_soon_threadsafe(self.note, event)

    def note(self, event: SessionEvent) -> None:
        data = event.data
        if isinstance(data, ToolExecutionStartData) and data.tool_name == TASK_TOOL and not event.agent_id:
            self.subagents[data.tool_call_id] = self.loop.create_task(self.start(data))
        elif isinstance(data, SubagentStartedData) and event.agent_id:
            self.task_of[event.agent_id] = data.tool_call_id
            self.loop.create_task(self.wake())
        elif isinstance(data, ToolExecutionCompleteData) and data.tool_call_id in self.subagents:
            self.loop.create_task(self.finish(data.tool_call_id, data))

    async def wake(self) -> None:
        async with self.noted:
            self.noted.notify_all()

    async def start(self, data: ToolExecutionStartData) -> Subagent:
        arguments = data.arguments if isinstance(data.arguments, dict) else {}
        subagent, call_id = await self.toolbox.start_subagent(
            TASK_TOOL, arguments, arguments.get("description") or "Sub-agent", arguments.get("prompt") or "")
        return subagent, await subagent.snapshot(), call_id

    async def finish(self, task_call_id: str, data: ToolExecutionCompleteData) -> None:
        try:
            subagent, _, call_id = await self.subagents.pop(task_call_id)
        except Refused:
            return  # its chat never opened (the person may not create chats): nothing to end
        report = data.result.content if data.result else (data.error.message if data.error else "")
        await self.toolbox.end_subagent(call_id, subagent, report, not data.success)

    async def answer(self, name: str, arguments: dict, agent_id: str | None) -> tuple[str, bool]:
        if not agent_id:
            return await self.toolbox.answer(self.snapshot, name, arguments)
        try:
            async with self.noted:
                await asyncio.wait_for(self.noted.wait_for(lambda: agent_id in self.task_of), ATTRIBUTION_SECONDS)
            subagent, snapshot, _ = await self.subagents[self.task_of[agent_id]]
        except (asyncio.TimeoutError, KeyError):
            return UNATTRIBUTED, True
        except Refused as refusal:
            return refusal.sentence, True
        return await subagent.answer(snapshot, name, arguments)

    async def stop(self) -> None:
        """The turn is over: a sub-agent still open ends with it."""
        subagents, self.subagents = self.subagents, {}
        for opening in subagents.values():
            try:
                subagent, _, call_id = await opening
            except Refused:
                continue
            await self.toolbox.end_subagent(call_id, subagent, SUBAGENT_STOPPED, failed=True)


def custom_tools(snapshot: "CatalogSnapshot", agents: "CurrentTurn") -> list[Tool]:
    """The snapshot's tools as SDK custom tools, each answered through its agent's toolbox."""
    def handler_for(name: str) -> Callable[[ToolInvocation], Awaitable[ToolResult]]:
        async def handler(invocation: ToolInvocation) -> ToolResult:
            arguments = invocation.arguments if invocation.arguments is not None else {}
            text, failed = await agents.answer(name, arguments, invocation.agent_id)
            return ToolResult(text_result_for_llm=text, result_type="failure" if failed else "success",
                              error=text if failed else None)
        return handler

    return [Tool(name=d["name"], description=d.get("description") or d["name"], handler=handler_for(d["name"]),
                 parameters=d.get("inputSchema") or {"type": "object", "properties": {}}, skip_permission=True,
                 overrides_built_in_tool=True)  # a host tool named like a built-in (list_agents) is the one offered
            for d in snapshot.definitions]


# The built-in a permission request is for, by its kind.
BUILTIN_OF_KIND = {"shell": "bash", "write": "edit", "read": "view", "url": "web_fetch"}


def permission_handler(toolbox: "ChatToolbox", connection: AgentConnection
                       ) -> Callable[[PermissionRequest, PermissionInvocation], Awaitable[Permission]]:
    """A permission request for one of the CLI's built-ins: the person's call (an AHP tool
    confirmation), unless the tenant approves all."""
    async def handle(request: PermissionRequest, invocation: PermissionInvocation) -> Permission:
        kind = getattr(request, "kind", "tool")
        command = getattr(request, "full_command_text", None)
        refusal = await builtin_permission(toolbox, connection, BUILTIN_OF_KIND.get(kind, kind),
                                           {"command": command} if command else {}, command)
        return PermissionDecisionApproveOnce() if refusal is None else PermissionDecisionReject(feedback=refusal)
    return handle


class Streamed:
    """The reply's text as the model streams it into the chat, in order: the SDK's event
    handlers are synchronous, so pieces queue for one writer. The model's messages are parted
    by a blank line."""

    def __init__(self, toolbox: "ChatToolbox") -> None:
        self.toolbox, self.pieces = toolbox, list[str]()
        self.message: str | None = None  # the id of the model's message the last piece is of
        self.loop, self.queue = asyncio.get_running_loop(), asyncio.Queue[str | None]()
        self.writer = self.loop.create_task(self.write())

    @property
    def text(self) -> str:
        return "".join(self.pieces)

    def take(self, event: SessionEvent) -> None:
        data = event.data
        # A sub-agent's words are not the reply.
        if not isinstance(data, AssistantMessageDeltaData) or not data.delta_content or event.agent_id \
                or data.parent_tool_call_id:
            return
        piece = ("\n\n" if self.pieces and data.message_id != self.message else "") + data.delta_content
        self.message = data.message_id
        self.pieces.append(piece)
        self.loop.call_soon_threadsafe(self.queue.put_nowait, piece)

    async def write(self) -> None:
        while (piece := await self.queue.get()) is not None:
            await self.toolbox.stream(piece)

    async def finish(self) -> None:
        """Every piece taken is in the chat."""
        self.loop.call_soon_threadsafe(self.queue.put_nowait, None)
        await self.writer
