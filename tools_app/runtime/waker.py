"""How an agent waiting on a client's tool call learns its result: a wake-up over the channel
layer, or, when that is lost, the call's row, read for every waiter at once."""
import asyncio
import logging
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from channels.layers import get_channel_layer
from django.db import InterfaceError, OperationalError
from django.utils import timezone

from kernel.orm import database_sync_to_async
from sessions_app import actions
from sessions_app.models import ToolCall

from .context import ToolResult

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
CALL_GONE = "The tool call was removed with its session."

# Where the result of one waited-on call arrives.
Waiting = asyncio.Queue[ToolResult]


class Waker:
    """One channel-layer reader per process and event loop, handing each `wake` to the local
    waiter of the call it names. A call records this reader's channel as it begins, and its
    completion sends there: no layer membership per call (on Redis, a SUBSCRIBE and an
    UNSUBSCRIBE each). A single reader that is never cancelled: cancelling layer receives (as
    per-waiter timeouts would) stalls the Redis layer's shared receive loop. Wake-ups that never
    came are recovered from the calls' rows, for all waiters at once."""

    def __init__(self) -> None:
        self.loop: asyncio.AbstractEventLoop | None = None
        self.channel = ""  # no reader yet: nothing to wake
        self.waiters: dict[str, Waiting] = {}
        self.begun_calls: set[str] = set()  # the waited-on calls whose begin committed: their rows tell

    async def ensure_started(self) -> None:
        loop = asyncio.get_running_loop()
        if self.loop is loop:
            return
        self.loop = loop
        self.waiters = {}
        self.begun_calls = set()
        self.channel = await get_channel_layer().new_channel()
        loop.create_task(self.read())
        loop.create_task(self.recover())

    async def read(self) -> None:
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

    async def recover(self) -> None:
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

    def hand(self, call_id: str | None, result: ToolResult) -> None:
        queue = self.waiters.get(call_id) if call_id is not None else None
        if queue is not None:
            queue.put_nowait(result)

    async def register(self, call_id: Any) -> Waiting:
        """The queue the result of call `call_id` arrives on."""
        await self.ensure_started()
        return self.waiters.setdefault(str(call_id), asyncio.Queue())

    def begun(self, call_id: Any) -> None:
        """The call's begin committed: from now on a missing row means it went with its session,
        where before its row was only not yet written."""
        self.begun_calls.add(str(call_id))

    def unregister(self, call_id: Any) -> None:
        self.waiters.pop(str(call_id), None)
        self.begun_calls.discard(str(call_id))


WAKER = Waker()


def ended_calls(call_ids: Iterable[str]) -> dict[str, ToolResult]:
    """{call id: result} of those of `call_ids` that completed or are gone (with their session)."""
    call_ids = list(call_ids)
    found: dict[str, tuple[datetime | None, Any]] = {
        str(call_id): (completed, result) for call_id, completed, result
             in ToolCall.objects.filter(id__in=call_ids).values_list("id", "completed", "result")}
    gone = actions.failure("tool", CALL_GONE)
    return {call_id: found[call_id][1] if call_id in found else gone
            for call_id in call_ids if call_id not in found or found[call_id][0] is not None}


async def wait_for_result(call_id: Any, deadline: datetime | None, woken: Waiting) -> ToolResult:
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
        if expired or (deadline is not None and timezone.now() >= deadline):
            deadline = None  # it ended, here or elsewhere: its wake-up comes
