"""A turn's run: its provider answers it, it ends (whatever failed), what its tools asked for at
its end is carried out, and the chat's next queued message starts; and where a turn the host
began runs (`launch_turn`)."""
import asyncio
import logging
import os
from typing import Any

from asgiref.sync import SyncToAsync

from agents.model_check import cli_failure
from agents.registry import get_provider
from agents.warm import WARM
from kernel.orm import database_sync_to_async
from kernel.refusals import Refused
from sessions_app import actions
from sessions_app.actions.homes import handed_home
from sessions_app.events.heartbeat import keep_process_alive
from sessions_app.models import Turn

from ..chat_provider import provider_of
from ..families.mcp_servers.server_tools import settle_listings
from ..families.session.workspace import settle_turn_effects
from ..queries import turn_to_run
from ..tool_threads import TOOL_THREADS, Overran
from .toolbox import ChatToolbox
from .waker import DATABASE_DOWN, FIRST_READ_SECONDS, LONGEST_READ_SECONDS

logger = logging.getLogger(__name__)

# This process's serving loop, once a turn ran on it: where a turn launched from a thread runs.
_LOOP: dict[str, asyncio.AbstractEventLoop] = {}


async def end_turn(turn_id: Any, **ending: Any) -> Any:
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
        turn, provider = None, None
        try:  # whatever fails here ends the turn: its lease is this live process's, no sweep would
            turn, provider = await database_sync_to_async(turn_to_run)(turn_id)
            await settle_catalog(turn)
            answering = get_provider(provider)
            if answering is None:
                raise LookupError(f"no provider {provider!r}")
            reply = await answering.run_turn(turn.text, ChatToolbox(turn))
        except Exception as exc:
            sentence = provider and cli_failure(provider, str(exc))
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
            try:
                await TOOL_THREADS.run(turn.chat.session.tenant_id if turn else None, settle_turn_effects, turn_id)
            except Overran:  # its chat's next turn must not wait on it for ever
                logger.error("Settling turn %s's effects overran %g s; they go on unwatched", turn_id,
                             TOOL_THREADS.deadline)
        next_turn = None
        if turn is not None and (after is None or after.pending):
            next_turn = await database_sync_to_async(actions.do_start_queued_turn)(turn.chat_id)
        turn_id = next_turn.id if next_turn else None


async def settle_catalog(turn: Turn) -> None:
    """The turn's first model request is offered the session's MCP servers' tools, not a catalog
    their listing has yet to finish (bounded); the chat hears of each server the turn runs without."""
    unavailable = await settle_listings(turn.chat.session)
    if unavailable:
        await database_sync_to_async(actions.do_notify_turn)(turn.id, unavailable)


async def interrupt_turn(turn: Turn) -> None:
    """A cancelled turn's agent is told to stop, when this process runs it (elsewhere its answer
    is dropped when it comes: the turn's row has ended)."""
    provider = get_provider(await database_sync_to_async(provider_of)(turn.chat))
    cancel = getattr(provider, "cancel", None)
    if cancel is not None:
        await cancel(turn.chat.session_id)


def calling_server_loop() -> asyncio.AbstractEventLoop | None:
    """The ASGI server's loop when this thread is a sync view's (asgiref records it there)."""
    local = SyncToAsync.threadlocal
    if getattr(local, "main_event_loop_pid", None) != os.getpid():
        return None
    return getattr(local, "main_event_loop", None)


def launch_turn(turn_id: Any) -> None:
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
