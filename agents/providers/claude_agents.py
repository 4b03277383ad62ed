"""One Claude turn's agents: the turn's own and each sub-agent an Agent call starts (its chat
opened by the PreToolUse hook), and which of them made each tool call, told by the message stream."""
import asyncio
from typing import TYPE_CHECKING, Any

from claude_agent_sdk import AssistantMessage, HookInput, ToolResultBlock, ToolUseBlock, UserMessage
from claude_agent_sdk.types import SyncHookJSONOutput

from kernel.refusals import Refused

if TYPE_CHECKING:
    from tools_app.catalog.catalog import CatalogSnapshot
    from tools_app.runtime.toolbox import ChatToolbox

    from .claude import OwnServers

SUBAGENT = "worker"
AGENT_TOOL = "Agent"  # Claude Code's sub-agent tool; "Task" is its older name
NOT_OUR_SUBAGENT = f'Only the host\'s sub-agent runs here: call {AGENT_TOOL} with subagent_type "{SUBAGENT}".'
SUBAGENT_STOPPED = "The sub-agent stopped with the turn that started it."
OWN_CALL_STOPPED = "The turn ended before the server answered."
UNATTRIBUTED = "The host could not tell which agent made this call, so it did not run."
# How long a call waits for the message stream to say which agent made it (it is written before the call).
ATTRIBUTION_SECONDS = 30


def deny(sentence: str) -> SyncHookJSONOutput:
    """A PreToolUse hook's answer: the call does not run, and the model reads `sentence`."""
    return {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                                   "permissionDecisionReason": sentence}}


def block_text(content: str | list[dict[str, Any]] | None) -> str:
    if isinstance(content, list):
        return "\n".join(c.get("text", "") for c in content if c.get("type") == "text")
    return content or ""


class Agents:
    """One turn's agents, the turn's own and each sub-agent an Agent call started, and which of
    them made each tool call (so it runs, shows and is checked in that agent's chat)."""

    def __init__(self, toolbox: "ChatToolbox", snapshot: "CatalogSnapshot", own: "OwnServers") -> None:
        self.toolbox, self.snapshot, self.own = toolbox, snapshot, own
        # tool_use id -> (the toolbox it shows in, the host's call id, its catalog name)
        self.own_calls: dict[str, tuple["ChatToolbox", Any, str]] = {}
        # tool_use id -> the Agent call's tool_use id whose sub-agent made it (None: the turn's)
        self.parents: dict[str, str | None] = {}
        # an Agent call's tool_use id -> (its sub-agent's toolbox, snapshot, the host's call id)
        self.subagents: dict[str, tuple["ChatToolbox", "CatalogSnapshot", Any]] = {}
        self.noted = asyncio.Condition()

    async def note(self, message: AssistantMessage) -> None:
        """An assistant message from the stream: whose its tool calls are."""
        for block in message.content:
            if isinstance(block, ToolUseBlock):
                self.parents[block.id] = message.parent_tool_use_id
                if block.name in self.own.held:
                    await self.begin_own_call(block, message.parent_tool_use_id)
        async with self.noted:
            self.noted.notify_all()

    async def begin_own_call(self, block: ToolUseBlock, parent: str | None) -> None:
        """A call on one of the CLI's own servers, which the CLI runs: it shows in its agent's chat."""
        toolbox, snapshot = self.toolbox, self.snapshot
        if parent in self.subagents:
            toolbox, snapshot = self.subagents[parent][:2]
        name = self.own.held[block.name]
        snapshot = snapshot if name in snapshot.bindings else self.snapshot
        self.own_calls[block.id] = (toolbox, await toolbox.begin_harness_call(snapshot, name, block.input), name)

    async def answer(self, name: str, arguments: dict, tool_use_id: str | None) -> tuple[str, bool]:
        if tool_use_id is None:  # the CLI names every call's; without it no agent can be told
            return UNATTRIBUTED, True
        try:
            async with self.noted:
                await asyncio.wait_for(self.noted.wait_for(lambda: tool_use_id in self.parents), ATTRIBUTION_SECONDS)
        except asyncio.TimeoutError:
            return UNATTRIBUTED, True
        parent = self.parents[tool_use_id]
        if parent is None:
            return await self.toolbox.answer(self.snapshot, name, arguments)
        if parent not in self.subagents:
            return UNATTRIBUTED, True
        subagent, snapshot, _ = self.subagents[parent]
        return await subagent.answer(snapshot, name, arguments)

    async def start(self, hook_input: HookInput, tool_use_id: str | None, context: Any) -> SyncHookJSONOutput:
        """An Agent call is about to run (PreToolUse): its sub-agent's chat opens, or it is denied."""
        if hook_input["hook_event_name"] != "PreToolUse":  # the only event its hook is registered for
            return {}
        arguments = hook_input.get("tool_input") or {}
        if arguments.get("subagent_type") != SUBAGENT:
            return deny(NOT_OUR_SUBAGENT)
        try:
            subagent, call_id = await self.toolbox.start_subagent(
                hook_input["tool_name"], arguments, arguments.get("description") or "Sub-agent",
                arguments.get("prompt") or "")
        except Refused as refusal:
            return deny(refusal.sentence)
        self.subagents[hook_input["tool_use_id"]] = (subagent, await subagent.snapshot(), call_id)
        return {}

    async def finish(self, message: UserMessage) -> None:
        """A user message: a result of an own server's call completes it; one of an Agent call
        (in the turn's own thread) ends its sub-agent."""
        if isinstance(message.content, str):
            return
        for block in message.content:
            if not isinstance(block, ToolResultBlock):
                continue
            if block.tool_use_id in self.own_calls:
                toolbox, call_id, name = self.own_calls.pop(block.tool_use_id)
                await toolbox.complete_harness_call(call_id, name, block_text(block.content), bool(block.is_error))
            elif message.parent_tool_use_id is None and block.tool_use_id in self.subagents:
                subagent, _, call_id = self.subagents.pop(block.tool_use_id)
                # Its final report, as the CLI hands it back (it streams no sub-agent's closing words).
                report = block_text(block.content)
                await self.toolbox.end_subagent(call_id, subagent, report, bool(block.is_error))

    async def stop(self) -> None:
        """The turn is over: a call or a sub-agent still open ends with it."""
        calls, self.own_calls = self.own_calls, {}
        for toolbox, call_id, name in calls.values():
            await toolbox.complete_harness_call(call_id, name, OWN_CALL_STOPPED, True)
        subagents, self.subagents = self.subagents, {}
        for subagent, _, call_id in subagents.values():
            await self.toolbox.end_subagent(call_id, subagent, SUBAGENT_STOPPED, failed=True)
