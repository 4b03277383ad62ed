"""The tools a provider may use in one turn: the chat's catalog, each call shown in the chat, a
host tool run here and a client's handed to its client and waited for."""
import asyncio
import logging
import uuid
from typing import TYPE_CHECKING, Any, cast

from django.db import transaction

from grants.models import Principal
from kernel.orm import database_sync_to_async
from kernel.refusals import Refused
from sessions_app import actions
from sessions_app.models import ToolCall, Turn

from ..actions import do_keep_full_output
from ..agent_connections import opened_connection
from ..catalog.bounding import bound_result, result_text
from ..catalog.catalog import CatalogSnapshot
from ..catalog.loader import catalog_for_chat, catalog_for_session
from ..catalog.registry import Binding
from ..catalog.validation import ToolRefusal, input_problem
from ..families.mcp_servers.server_tools import runnable_session_servers, session_server_tools
from ..harness_permissions import ask_permission
from ..models import AgentDefinition, HostConfig
from ..tool_threads import TOOL_THREADS, Overran
from .context import ToolCallContext, ToolResult, as_result
from .waker import WAKER, wait_for_result

if TYPE_CHECKING:
    from agents.harness import AgentConnection

logger = logging.getLogger(__name__)

# A call begun: what it binds to, its row, and who runs it (None: its client runs it).
Begun = tuple[Binding, ToolCall, Principal | None]


class ChatToolbox:
    """The tools a provider may use in one turn; a fresh snapshot per model request."""

    def __init__(self, turn: Turn) -> None:
        self.turn = turn
        self.chat = turn.chat
        self.session = turn.chat.session

    def principal(self) -> Principal:
        if self.turn.sender_id is None:
            return Principal.nobody(self.session.tenant)
        return Principal.for_person(self.session.tenant, self.turn.sender)

    async def snapshot(self) -> CatalogSnapshot:
        return await database_sync_to_async(catalog_for_chat)(self.chat)

    async def names(self) -> list[str]:
        return (await self.snapshot()).names

    async def tool_origin_names(self) -> list[str]:
        """The catalog's names in a chat a tool call starts (a sub-agent's): no userChats tools."""
        return (await database_sync_to_async(catalog_for_session)(self.session, "tool")).names

    async def start_subagent(self, tool_name: str, arguments: dict[str, Any], title: str,
                             prompt: str) -> tuple["ChatToolbox", uuid.UUID]:
        """A harness's sub-agent begins: its call shows in this chat and it works in a worker chat
        of its own. The sub-agent's toolbox and the id of the call that started it."""
        def start() -> tuple[ToolCall, Turn]:
            return actions.do_start_subagent(self.principal(), self.turn, tool_name, arguments, title, prompt)
        call, turn = await database_sync_to_async(start)()
        return ChatToolbox(turn), call.id

    @staticmethod
    async def end_subagent(call_id: uuid.UUID, subagent: "ChatToolbox", report: str, failed: bool = False) -> None:
        """The sub-agent's turn and the call that started it end with its `report`."""
        await database_sync_to_async(actions.do_end_subagent)(call_id, subagent.turn.id, report, failed)

    async def agent_definition(self) -> AgentDefinition | None:
        """The tenant's agent definition the session names (its model, instructions, tools policy), or None."""
        def load() -> AgentDefinition | None:
            name = (self.session.config or {}).get("agentDefinition")
            if not name or AgentDefinition.document_for_session(self.session) is None:
                return None
            return AgentDefinition.objects.for_tenant(self.session.tenant).get(name=name)
        return await database_sync_to_async(load)()

    async def agent_connection(self, provider_id: str, defaults: "AgentConnection") -> "AgentConnection":
        """The tenant's agentConnections entry for `provider_id` over the host's `defaults`, secrets opened."""
        def load() -> "AgentConnection":
            entries = HostConfig.current(self.session.tenant).agent_connections
            return cast("AgentConnection", opened_connection(entries, provider_id, dict(defaults)))
        return await database_sync_to_async(load)()

    async def listed_server_tools(self) -> Any:
        """Every tool the session's MCP servers listed, offered in this chat or not."""
        return await database_sync_to_async(session_server_tools)(self.session)

    async def runnable_mcp_servers(self) -> Any:
        """The session's MCP servers as an agent the host starts runs them, and the host
        folders their commands read."""
        return await database_sync_to_async(runnable_session_servers)(self.session)

    async def begin_harness_call(self, snapshot: CatalogSnapshot, name: str, arguments: dict[str, Any]) -> uuid.UUID:
        """A call the harness runs itself, on an MCP server it was handed: it shows here under its
        catalog name and source, as any call. Its id."""
        call, _ = await database_sync_to_async(self.begin_host_call)(snapshot.bindings[name], arguments)
        return call.id

    async def complete_harness_call(self, call_id: uuid.UUID, name: str, text: str, failed: bool) -> None:
        result = actions.failure(name, text) if failed else as_result(name, text)
        await database_sync_to_async(complete_host_call)(call_id, result, self.turn)

    async def call(self, name: str, arguments: Any) -> str:
        """A call against the chat's catalog as it is now, read in the call's begin."""
        return result_text(await self.execute(None, name, arguments))

    async def stream(self, text: str) -> None:
        """A piece of the reply as the model writes it (chat/responsePart, then chat/delta)."""
        await database_sync_to_async(actions.do_stream_reply)(self.turn.id, text)

    async def ask_permission(self, tool_name: str, arguments: Any, title: str) -> str | None:
        """None when the person lets the harness run its own `tool_name` (an AHP tool confirmation),
        else the refusal sentence for the harness to hand its model."""
        return await ask_permission(self.turn, tool_name, arguments, title)

    async def answer(self, snapshot: CatalogSnapshot, name: str, arguments: Any) -> tuple[str, bool]:
        """A call made against `snapshot`, as a harness hands it back to its model: (text, failed)."""
        result = await self.execute(snapshot, name, arguments)
        return result_text(result), not result.get("success")

    async def execute(self, snapshot: CatalogSnapshot | None, name: str, arguments: Any) -> ToolResult:
        """Run a call made against `snapshot` (None: the chat's as it is now). The snapshot's
        read and check and the call's begin are one hop onto the ORM threads."""
        call_id = uuid.uuid4()
        # Listen before the client can possibly answer, so its answer's wake-up is never missed.
        woken = await WAKER.register(call_id)
        try:
            begun = await database_sync_to_async(self.begin_call)(snapshot, name, arguments, call_id)
            if not isinstance(begun, tuple):
                return begun  # refused: the result the chat shows
            binding, call, principal = begun
            if principal is None:  # a client's call: its client runs it
                WAKER.begun(call_id)
                return await wait_for_result(call.id, call.deadline, woken)
            return await self.run_host_tool(binding, arguments, call, principal)
        except Refused as refusal:  # its begin: a cancelled (or truncated) turn begins no more calls
            return actions.failure(name, refusal.sentence)
        finally:
            WAKER.unregister(call_id)

    def begin_call(self, snapshot: CatalogSnapshot | None, name: str, arguments: Any,
                   call_id: uuid.UUID) -> Begun | ToolResult:
        """(binding, call, principal) of the call begun, or the result of one the snapshot refused."""
        snapshot = snapshot or catalog_for_chat(self.chat)
        try:
            binding = snapshot.check_input(name, arguments)
        except ToolRefusal as refusal:
            # The refused call shows its input, unless that input could not be kept at all.
            kept = arguments if isinstance(arguments, dict) and input_problem(name, arguments) is None else {}
            return actions.do_refuse_tool_call(self.turn, name, kept, refusal.sentence)
        if binding.client_id:
            return binding, self.begin_client_call(call_id, binding, binding.client_id, arguments,
                                                   snapshot.client_tool_timeout_ms), None
        return binding, *self.begin_host_call(binding, arguments, call_id)

    def begin_host_call(self, binding: Binding, arguments: Any,
                        call_id: uuid.UUID | None = None) -> tuple[ToolCall, Principal]:
        tool = binding.tool
        call = actions.do_begin_tool_call(self.turn, binding.name, arguments, display_name=tool.title or tool.name,
                                          source=tool.source, call_id=call_id)
        return call, self.principal()

    async def run_host_tool(self, binding: Binding, arguments: Any, call: ToolCall,
                            principal: Principal) -> ToolResult:
        tool = binding.tool
        context = ToolCallContext(principal, self.session, self.chat, self.turn, str(call.id))
        try:
            if tool.executor is None:
                raise RuntimeError(f"{binding.name} has nothing to run it")
            if asyncio.iscoroutinefunction(tool.executor):
                value = await TOOL_THREADS.within_deadline(tool.executor(context, arguments))
            else:
                value = await TOOL_THREADS.run(self.session.tenant_id, tool.executor, context, arguments)
            result = as_result(binding.name, value)
        except Refused as refusal:
            result = actions.failure(binding.name, refusal.sentence)
        except Overran:
            result = actions.failure(binding.name, f"{binding.name} did not finish within {TOOL_THREADS.deadline:g} "
                                                   "seconds, so the host stopped waiting for it.")
        except Exception as exc:
            logger.exception("Tool %s raised", binding.name)
            result = actions.failure(binding.name, f"{binding.name} raised {exc.__class__.__name__}: {exc}")
        return await database_sync_to_async(complete_host_call)(call.id, result, self.turn)

    def begin_client_call(self, call_id: uuid.UUID, binding: Binding, client_id: str, arguments: Any,
                          timeout_ms: int) -> ToolCall:
        """Hand the call to its client (`client_id`, the binding's), due within `timeout_ms` (0: no deadline); its completion
        wakes this process's WAKER. No task per call for its deadline: its waiter expires it
        then, or, if the waiter's process died, the sweep (sweep_due_work) within seconds."""
        # Drawn under the name the client announced, as the reference host does; the model
        # called it by its catalog name `<clientId>__<name>`.
        name = binding.client_tool_name or binding.name
        return actions.do_begin_tool_call(
            self.turn, name, arguments, display_name=binding.tool.title or name,
            client_id=client_id, timeout_ms=timeout_ms, call_id=call_id, waker=WAKER.channel)


def complete_host_call(call_id: uuid.UUID, result: ToolResult, turn: Turn | None = None) -> ToolResult:
    """Complete a host tool's call (of `turn`, when the caller holds it) with its bounded
    result, keeping the whole text if it was cut."""
    offered, full_text = bound_result(result, call_id)
    with transaction.atomic():
        if actions.do_complete_tool_call(call_id, offered, turn) and full_text is not None:
            do_keep_full_output(call_id, full_text)
    return offered
