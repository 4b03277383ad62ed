"""Running a turn: the session's provider answers it, calling tools through the chat's catalog.

Every call, refused or not, shows in the chat as tool call actions. A host tool runs here; a
client's tool is handed to that client and the agent waits for its result, which may arrive on
any worker process: the row is the truth, the channel layer only wakes the waiter early.
"""
import asyncio
import functools
import logging
import os
import uuid
from dataclasses import dataclass
from typing import Any

from asgiref.sync import SyncToAsync
from channels.layers import get_channel_layer
from django.contrib.auth import get_user_model
from django.db import InterfaceError, OperationalError, connection, transaction
from django.utils import timezone

from agents.model_check import cli_failure
from agents.registry import get_provider
from agents.warm import WARM
from grants.models import Principal, Tenant
from kernel.orm import database_sync_to_async
from kernel.refusals import Refused
from kernel.rows import Columns, fetch_one, table
from sessions_app import actions
from sessions_app.actions.homes import handed_home
from sessions_app.events.heartbeat import keep_process_alive
from sessions_app.models import PUBLISHED_TOOLS, Chat, ChatBackend, Session, ToolCall, Turn

from .catalog.bounding import bound_result, result_text
from .catalog.loader import catalog_for_chat, catalog_for_session
from .catalog.validation import ToolRefusal, input_problem
from .families.mcp_servers.server_tools import runnable_session_servers, session_server_tools, settle_listings
from .actions import do_keep_full_output
from .agent_connections import opened_connection
from .models import AgentDefinition, HostConfig
from .tool_threads import TOOL_THREADS, Overran

logger = logging.getLogger(__name__)

# How often a process reads, in one statement, which of the calls its agents wait on completed
# without their wake-up arriving (another process completed one without a shared channel layer,
# or the layer lost it).
RECOVER_SECONDS = 1.0
# How soon what waits on a database that did not answer asks again: soon, then ever less often.
FIRST_READ_SECONDS = 0.5
LONGEST_READ_SECONDS = 4.0
# A database that did not answer (restarting): what waits on it asks again.
DATABASE_DOWN = (OperationalError, InterfaceError)
# How long the wake-up reader pauses before asking a failed channel layer again.
LAYER_RETRY_SECONDS = 1.0


@dataclass(frozen=True)
class ToolCallContext:
    """What a host tool's executor is handed: who calls, from where."""

    principal: Any
    session: Any
    chat: Any
    turn: Any
    tool_call_id: str


def as_result(tool_name, value):
    """A host executor may answer text or a ToolCallResult-shaped dict."""
    if isinstance(value, dict) and "success" in value:
        return value
    return {"success": True, "pastTenseMessage": f"Ran {tool_name}", "content": [{"type": "text", "text": str(value)}]}


class ChatToolbox:
    """The tools a provider may use in one turn; a fresh snapshot per model request."""

    def __init__(self, turn):
        self.turn = turn
        self.chat = turn.chat
        self.session = turn.chat.session

    def principal(self):
        if self.turn.sender_id is None:
            return Principal(self.session.tenant, None, ("session:read",))
        return Principal.for_person(self.session.tenant, self.turn.sender)

    async def snapshot(self):
        return await database_sync_to_async(catalog_for_chat)(self.chat)

    async def names(self):
        return (await self.snapshot()).names

    async def tool_origin_names(self):
        """The catalog's names in a chat a tool call starts (a sub-agent's): no userChats tools."""
        return (await database_sync_to_async(catalog_for_session)(self.session, "tool")).names

    async def start_subagent(self, tool_name, arguments, title, prompt):
        """A harness's sub-agent begins: its call shows in this chat and it works in a worker chat
        of its own. The sub-agent's toolbox and the id of the call that started it."""
        def start():
            return actions.do_start_subagent(self.principal(), self.turn, tool_name, arguments, title, prompt)
        call, turn = await database_sync_to_async(start)()
        return ChatToolbox(turn), call.id

    @staticmethod
    async def end_subagent(call_id, subagent, report, failed=False):
        """The sub-agent's turn and the call that started it end with its `report`."""
        await database_sync_to_async(actions.do_end_subagent)(call_id, subagent.turn.id, report, failed)

    async def agent_definition(self):
        """The tenant's agent definition the session names (its model, instructions, tools policy), or None."""
        def load():
            name = (self.session.config or {}).get("agentDefinition")
            if not name or AgentDefinition.document_for_session(self.session) is None:
                return None
            return AgentDefinition.objects.for_tenant(self.session.tenant).get(name=name)
        return await database_sync_to_async(load)()

    async def agent_connection(self, provider_id, defaults):
        """The tenant's agentConnections entry for `provider_id` over the host's `defaults`, secrets opened."""
        def load():
            return opened_connection(HostConfig.current(self.session.tenant).agent_connections, provider_id, defaults)
        return await database_sync_to_async(load)()

    async def listed_server_tools(self):
        """Every tool the session's MCP servers listed, offered in this chat or not."""
        return await database_sync_to_async(session_server_tools)(self.session)

    async def runnable_mcp_servers(self):
        """The session's MCP servers as an agent the host starts runs them, and the host
        folders their commands read."""
        return await database_sync_to_async(runnable_session_servers)(self.session)

    async def begin_harness_call(self, snapshot, name, arguments):
        """A call the harness runs itself, on an MCP server it was handed: it shows here under its
        catalog name and source, as any call. Its id."""
        call, _ = await database_sync_to_async(self.begin_host_call)(snapshot.bindings[name], arguments)
        return call.id

    async def complete_harness_call(self, call_id, name, text, failed):
        result = actions.failure(name, text) if failed else as_result(name, text)
        await database_sync_to_async(complete_host_call)(call_id, result, self.turn)

    async def call(self, name, arguments):
        """A call against the chat's catalog as it is now, read in the call's begin."""
        return result_text(await self.execute(None, name, arguments))

    async def stream(self, text):
        """A piece of the reply as the model writes it (chat/responsePart, then chat/delta)."""
        await database_sync_to_async(actions.do_stream_reply)(self.turn.id, text)

    async def ask_permission(self, tool_name, arguments, title):
        """None when the person lets the harness run its own `tool_name` (an AHP tool confirmation),
        else the refusal sentence for the harness to hand its model."""
        from .harness_permissions import ask_permission

        return await ask_permission(self.turn, tool_name, arguments, title)

    async def answer(self, snapshot, name, arguments):
        """A call made against `snapshot`, as a harness hands it back to its model: (text, failed)."""
        result = await self.execute(snapshot, name, arguments)
        return result_text(result), not result.get("success")

    async def execute(self, snapshot, name, arguments):
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
            if binding.client_id:
                WAKER.begun(call_id)
                return await wait_for_result(call.id, call.deadline, woken)
            return await self.run_host_tool(binding, arguments, call, principal)
        except Refused as refusal:  # its begin: a cancelled (or truncated) turn begins no more calls
            return actions.failure(name, refusal.sentence)
        finally:
            WAKER.unregister(call_id)

    def begin_call(self, snapshot, name, arguments, call_id):
        """(binding, call, principal) of the call begun, or the result of one the snapshot refused."""
        snapshot = snapshot or catalog_for_chat(self.chat)
        try:
            binding = snapshot.check_input(name, arguments)
        except ToolRefusal as refusal:
            # The refused call shows its input, unless that input could not be kept at all.
            kept = arguments if isinstance(arguments, dict) and input_problem(name, arguments) is None else {}
            return actions.do_refuse_tool_call(self.turn, name, kept, refusal.sentence)
        if binding.client_id:
            return binding, self.begin_client_call(call_id, binding, arguments, snapshot.client_tool_timeout_ms), None
        return binding, *self.begin_host_call(binding, arguments, call_id)

    def begin_host_call(self, binding, arguments, call_id=None):
        tool = binding.tool
        call = actions.do_begin_tool_call(self.turn, binding.name, arguments, display_name=tool.title or tool.name,
                                          source=tool.source, call_id=call_id)
        return call, self.principal()

    async def run_host_tool(self, binding, arguments, call, principal):
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

    def begin_client_call(self, call_id, binding, arguments, timeout_ms):
        """Hand the call to its client, due within `timeout_ms` (0: no deadline); its completion
        wakes this process's WAKER. No task per call for its deadline: its waiter expires it
        then, or, if the waiter's process died, the sweep (sweep_due_work) within seconds."""
        # Drawn under the name the client announced, as the reference host does; the model
        # called it by its catalog name `<clientId>__<name>`.
        return actions.do_begin_tool_call(
            self.turn, binding.client_tool_name, arguments, display_name=binding.tool.title or binding.client_tool_name,
            client_id=binding.client_id, timeout_ms=timeout_ms, call_id=call_id, waker=WAKER.channel)


def complete_host_call(call_id, result, turn=None):
    """Complete a host tool's call (of `turn`, when the caller holds it) with its bounded
    result, keeping the whole text if it was cut."""
    offered, full_text = bound_result(result, call_id)
    with transaction.atomic():
        if actions.do_complete_tool_call(call_id, offered, turn) and full_text is not None:
            do_keep_full_output(call_id, full_text)
    return offered


class Waker:
    """One channel-layer reader per process and event loop, handing each `wake` to the local
    waiter of the call it names. A call records this reader's channel as it begins, and its
    completion sends there: no layer membership per call (on Redis, a SUBSCRIBE and an
    UNSUBSCRIBE each). A single reader that is never cancelled: cancelling layer receives (as
    per-waiter timeouts would) stalls the Redis layer's shared receive loop. Wake-ups that never
    came are recovered from the calls' rows, for all waiters at once."""

    def __init__(self):
        self.loop = None
        self.channel = ""  # no reader yet: nothing to wake
        self.waiters = {}
        self.begun_calls = set()  # the waited-on calls whose begin committed: their rows tell

    async def ensure_started(self):
        loop = asyncio.get_running_loop()
        if self.loop is loop:
            return
        self.loop = loop
        self.waiters = {}
        self.begun_calls = set()
        self.channel = await get_channel_layer().new_channel()
        loop.create_task(self.read())
        loop.create_task(self.recover())

    async def read(self):
        layer = get_channel_layer()
        while True:
            try:
                message = await layer.receive(self.channel)
            except Exception as exc:
                # The layer is down (Redis restarting): waiters are woken from their rows, and
                # this reader keeps trying, so wake-ups resume when the layer is back.
                logger.warning("Wake-ups wait for the channel layer (%s: %s)", exc.__class__.__name__, exc)
                await asyncio.sleep(LAYER_RETRY_SECONDS)
                continue
            self.hand(message.get("call"), message.get("result"))

    async def recover(self):
        """Every RECOVER_SECONDS, one read of the waited-on calls' rows wakes the waiters of
        those that completed (or went with their session): a lost wake-up costs a second, and a
        thousand waiting calls cost one statement, not a read each."""
        while True:
            await asyncio.sleep(RECOVER_SECONDS)
            if not self.begun_calls:
                continue
            try:
                ended = await database_sync_to_async(ended_calls)(list(self.begun_calls))
            except Exception as exc:  # the database is down: the next round reads again
                logger.warning("Waiting calls are read again when the database answers (%s: %s)",
                               exc.__class__.__name__, exc)
                continue
            for call_id, result in ended.items():
                self.hand(call_id, result)

    def hand(self, call_id, result):
        queue = self.waiters.get(call_id)
        if queue is not None:
            queue.put_nowait(result)

    async def register(self, call_id):
        """The queue the result of call `call_id` arrives on."""
        await self.ensure_started()
        return self.waiters.setdefault(str(call_id), asyncio.Queue())

    def begun(self, call_id):
        """The call's begin committed: from now on a missing row means it went with its session,
        where before its row was only not yet written."""
        self.begun_calls.add(str(call_id))

    def unregister(self, call_id):
        self.waiters.pop(str(call_id), None)
        self.begun_calls.discard(str(call_id))


WAKER = Waker()
CALL_GONE = "The tool call was removed with its session."


def ended_calls(call_ids):
    """{call id: result} of those of `call_ids` that completed or are gone (with their session)."""
    found = {str(call_id): (completed, result) for call_id, completed, result
             in ToolCall.objects.filter(id__in=call_ids).values_list("id", "completed", "result")}
    gone = actions.failure("tool", CALL_GONE)
    return {call_id: found[call_id][1] if call_id in found else gone
            for call_id in call_ids if call_id not in found or found[call_id][0] is not None}


async def wait_for_result(call_id, deadline, woken):
    """The call's result, from the wake-up its completion sends (or the waker's recovery of a lost
    one); at its deadline the call is expired here if nobody else has, which wakes it."""
    pause = FIRST_READ_SECONDS
    while True:
        wait = None if deadline is None else max(0.0, (deadline - timezone.now()).total_seconds())
        try:
            return await asyncio.wait_for(woken.get(), wait)
        except asyncio.TimeoutError:
            pass
        try:
            expired = await database_sync_to_async(actions.do_expire_tool_call)(call_id)
        except DATABASE_DOWN as exc:  # expired when the database is back
            logger.warning("Tool call %s expires when the database answers (%s: %s)",
                           call_id, exc.__class__.__name__, exc)
            await asyncio.sleep(pause)
            pause = min(pause * 2, LONGEST_READ_SECONDS)
            continue
        if expired or timezone.now() >= deadline:
            deadline = None  # it ended, here or elsewhere: its wake-up comes


async def end_turn(turn_id, **ending):
    """do_end_turn, retried until the database answers: an ending never depends on the database
    being up at the instant the agent finished (or failed because the database went away)."""
    pause = FIRST_READ_SECONDS
    while True:
        try:
            return await database_sync_to_async(actions.do_end_turn)(turn_id, **ending)
        except DATABASE_DOWN as exc:
            logger.warning("Turn %s ends when the database answers (%s: %s)", turn_id, exc.__class__.__name__, exc)
            await asyncio.sleep(pause)
            pause = min(pause * 2, LONGEST_READ_SECONDS)


_LOOP = {}


def turn_to_run(turn_id):
    """The turn, with what its run reads: its chat, session (all but its published tools), tenant
    and sender, and the provider that answers it (`turn.provider`). One hand-written statement,
    read at every turn's start."""
    turn = first_turn("t.id = %s", [Turn._meta.pk.get_db_prep_value(turn_id, connection)])
    if turn is None:
        raise Turn.DoesNotExist(f"No turn {turn_id}.")
    return turn


def first_turn(condition, params):
    """The first turn `condition` (on the turn `t` and its chat `c`) finds, read as `turn_to_run`
    reads one, or None."""
    columns, sql = _turn_reading(condition)
    found = fetch_one(columns, sql, params)
    if found is None:
        return None
    (turn, chat, session, tenant, sender), (backend,) = found
    session.tenant, chat.session, turn.chat, turn.sender = tenant, session, chat, sender
    turn.provider = backend or session.provider
    return turn


@functools.cache
def _turn_reading(condition):
    columns = (Columns(Turn, "t"), Columns(Chat, "c"), Columns(Session, "s", leave=(PUBLISHED_TOOLS,)),
               Columns(Tenant, "n"), Columns(get_user_model(), "u"))
    return columns, (
        f"SELECT {', '.join(c.sql for c in columns)}, (SELECT b.provider FROM {table(ChatBackend)} b "
        f"WHERE b.chat_id = c.id AND b.provider <> '') FROM {table(Turn)} t JOIN {table(Chat)} c ON c.id = t.chat_id "
        f"JOIN {table(Session)} s ON s.id = c.session_id JOIN {table(Tenant)} n ON n.id = s.tenant_id "
        f"LEFT JOIN {table(get_user_model())} u ON u.id = t.sender_id WHERE {condition}")


async def run_turn(turn_id: Any, on_process_loop: bool = True, at_home: bool = False) -> None:
    """Answer a turn with its session's provider, end it, then take the chat's next queued message.
    A turn whose session's home is another live process runs there (`at_home`: it was sent here)."""
    if not at_home and await handed_home(turn_id):
        return
    if on_process_loop:
        _LOOP["loop"] = asyncio.get_running_loop()
        WARM.serve_on(_LOOP["loop"])
    keep_process_alive()
    while turn_id is not None:
        turn = None
        try:  # whatever fails here ends the turn: its lease is this live process's, no sweep would
            turn = await database_sync_to_async(turn_to_run)(turn_id)
            await settle_catalog(turn)
            reply = await get_provider(turn.provider).run_turn(turn.text, ChatToolbox(turn))
        except Exception as exc:
            sentence = turn and cli_failure(turn.provider, str(exc))
            if sentence or isinstance(exc, Refused):  # a known failure: its sentence says it all
                logger.warning("Turn %s failed: %s", turn_id, sentence or exc)
            else:
                logger.exception("Turn %s failed", turn_id)
            after = await end_turn(turn_id, error=f"Refused: {sentence}" if sentence else f"{exc.__class__.__name__}: {exc}")
        else:
            after = await end_turn(turn_id, response_text=reply)
        # What the turn's tools asked for at its end (set_workspace, isolate_session): carried
        # out when it completed, dropped otherwise. A turn that ended elsewhere (cancelled) left
        # no word of what follows: both are looked for.
        if after is None or after.effects:
            from .families.session.workspace import settle_turn_effects

            try:
                await TOOL_THREADS.run(turn.chat.session.tenant_id if turn else None, settle_turn_effects, turn_id)
            except Overran:  # its chat's next turn must not wait on it for ever
                logger.error("Settling turn %s's effects overran %g s; they go on unwatched", turn_id,
                             TOOL_THREADS.deadline)
        next_turn = None
        if turn is not None and (after is None or after.pending):
            next_turn = await database_sync_to_async(actions.do_start_queued_turn)(turn.chat_id)
        turn_id = next_turn.id if next_turn else None


async def settle_catalog(turn):
    """The turn's first model request is offered the session's MCP servers' tools, not a catalog
    their listing has yet to finish (bounded); the chat hears of each server the turn runs without."""
    unavailable = await settle_listings(turn.chat.session)
    if unavailable:
        await database_sync_to_async(actions.do_notify_turn)(turn.id, unavailable)


async def interrupt_turn(turn):
    """A cancelled turn's agent is told to stop, when this process runs it (elsewhere its answer
    is dropped when it comes: the turn's row has ended)."""
    provider = get_provider(await database_sync_to_async(provider_of)(turn.chat))
    cancel = getattr(provider, "cancel", None)
    if cancel is not None:
        await cancel(turn.chat.session_id)


def provider_of(chat):
    """A chat the create tool made on another backend runs there; any other on its session's."""
    backend = ChatBackend.objects.filter(chat=chat).exclude(provider="").values_list("provider", flat=True).first()
    return backend or chat.session.provider


def calling_server_loop():
    """The ASGI server's loop when this thread is a sync view's (asgiref records it there)."""
    local = SyncToAsync.threadlocal
    if getattr(local, "main_event_loop_pid", None) != os.getpid():
        return None
    return getattr(local, "main_event_loop", None)


def launch_turn(turn_id):
    """Run a turn the host began (a message a tool sent, a wakeup): on this process's running
    event loop when called from one of its threads, otherwise here, to the end. A sync view's
    thread (the sessionless door) hands it to the server's loop even before any turn ran there:
    run here, the turn's database calls would wait on this very thread."""
    loop = _LOOP.get("loop")
    if loop is None or not loop.is_running():
        loop = calling_server_loop()
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is not None:
        running.create_task(run_turn(turn_id))
    elif loop is not None and loop.is_running():
        asyncio.run_coroutine_threadsafe(run_turn(turn_id), loop)
    else:
        # A loop of its own, never handed other turns: it ends with this one, and a turn another
        # thread handed it would be cancelled (two wakeups firing at once in a worker).
        asyncio.run(run_turn(turn_id, on_process_loop=False))
