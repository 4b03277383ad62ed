"""Per-process duties of a process holding WebSockets, started with its first socket: every
HEARTBEAT_SECONDS its sockets' rows and places are renewed (so a sweep can tell this process is
alive), sockets whose access ended are closed or re-read, and actions they missed are resent;
without a shared channel layer, the action log is tailed. Any process running turns renews its
lease on them (its HostProcess row) while its loop runs."""
import asyncio
import logging
import weakref
from collections.abc import Iterable

from channels.layers import InMemoryChannelLayer, get_channel_layer

from grants import liveness
from grants.models import ApiToken
from kernel.orm import database_sync_to_async
from kernel.outbox import serve_from

from ..actions.presence import do_mark_connections_seen, do_mark_process_alive
from . import sockets
from .catch_up import catch_up_subscribers, tail_action_log
from .log import PROCESS

logger = logging.getLogger(__name__)

_started: dict[str, object] = {}  # "loop": the loop the duties run on; "tasks": theirs
_renewing: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Task[None]]" = (
    weakref.WeakKeyDictionary())  # event loop -> its task renewing this process's lease


def ensure_started() -> None:
    loop = asyncio.get_running_loop()
    if _started.get("loop") is loop:
        return
    _started["loop"] = loop
    serve_from(loop)
    keep_process_alive()
    tasks = [loop.create_task(heartbeat())]
    if isinstance(get_channel_layer(), InMemoryChannelLayer):
        tasks.append(loop.create_task(tail_action_log()))
    _started["tasks"] = tasks


def keep_process_alive() -> None:
    """While the running loop lives, this process's HostProcess row stays fresh: the turns it
    runs (and terminals it holds) are its own. A loop that ends with its work (a Celery task's)
    ends its renewal with it."""
    loop = asyncio.get_running_loop()
    if loop not in _renewing:
        _renewing[loop] = loop.create_task(renew_process_lease())


async def renew_process_lease() -> None:
    while True:
        try:
            await database_sync_to_async(do_mark_process_alive)(PROCESS)
        except Exception as exc:  # the database is down: renewed when it answers again
            logger.warning("Could not renew this process's lease (%s: %s)", exc.__class__.__name__, exc)
        await asyncio.sleep(sockets.HEARTBEAT_SECONDS)


async def heartbeat() -> None:
    while True:
        try:
            # Only rows of sockets still open here: a socket whose clean-up failed (the database
            # was down) goes stale, and the sweep closes it by the disconnect rule.
            open_ids = [c.connection_id for c in sockets.open_sockets() if getattr(c, "connection_id", None)]
            await database_sync_to_async(do_mark_connections_seen)(PROCESS, open_ids)
            await sockets.renew_places()
            await close_revoked()
            await reread_stale_access()
            await catch_up_subscribers(sockets.open_sockets())
        except Exception:
            logger.exception("Could not refresh this process's connections")
        await asyncio.sleep(sockets.HEARTBEAT_SECONDS)


def _live_token_ids(token_ids: Iterable[int]) -> set[int]:
    return set(ApiToken.live().filter(pk__in=token_ids).values_list("pk", flat=True))


async def close_revoked() -> None:
    """Sockets whose token stopped working close even when the news did not reach this process
    (an in-memory channel layer, revoked from a management command): the sockets are told at
    once through the channel layer, and this catches the rest within a heartbeat."""
    consumers = [c for c in sockets.open_sockets() if getattr(c, "token_id", None)]
    if not consumers:
        return
    live = await database_sync_to_async(_live_token_ids)({c.token_id for c in consumers})
    for consumer in consumers:
        if consumer.token_id not in live:
            await consumer.close_revoked()


async def reread_stale_access() -> None:
    """On the embedded host no news of an access change made in another process reaches a socket
    (grants.liveness): one that stayed silent since re-reads its access here, so a demoted
    person's socket leaves the channels they may no longer read within a heartbeat."""
    if liveness.marks_path() is None:
        return  # the shared channel layer told them
    reading = liveness.current()
    for consumer in [c for c in sockets.open_sockets() if getattr(c, "liveness_read", reading) != reading]:
        await consumer.reread_access()
