"""Per-process duties of a process holding WebSockets: refresh its connections' `seen` (so a
sweep can tell this process is alive), and, without a shared channel layer, forward actions
other processes (the Celery worker) logged to this process's subscribers. Any process running
turns renews its lease on them (its HostProcess row) while its loop runs."""
import asyncio
import logging
import os
import weakref
from collections import Counter

from channels.layers import InMemoryChannelLayer, get_channel_layer
from django.conf import settings
from django.db.models import Q

from grants import liveness
from grants.models import ApiToken
from kernel import shared_counts
from kernel.orm import database_sync_to_async
from kernel.outbox import serve_from

from ..actions.presence import do_mark_connections_seen, do_mark_process_alive
from ..models import ActionLog, ServerSeq
from .delivery import action_message, group_for
from .log import PROCESS

logger = logging.getLogger(__name__)

HEARTBEAT_SECONDS = float(os.environ.get("AHP_HEARTBEAT_SECONDS", "5"))
TAIL_SECONDS = 0.2
_started = {}
_renewing = weakref.WeakKeyDictionary()  # event loop -> its task renewing this process's lease
# This process's open sockets: the heartbeat keeps only their rows fresh, and a failed channel
# layer closes them all.
_consumers = weakref.WeakSet()


_open = Counter()  # (tenant pk, person pk or None) -> sockets of this process it holds
# How long a socket's place in its person's shared count (Redis) outlives this process's last
# heartbeat: a node that died frees its people's places within this.
PLACE_SECONDS = 3 * HEARTBEAT_SECONDS


def owner_of(consumer):
    return consumer.tenant.pk, getattr(consumer.principal.person, "pk", None)


def track(consumer):
    if consumer not in _consumers:
        _consumers.add(consumer)
        _open[owner_of(consumer)] += 1


def open_by(tenant_id, person_id):
    """How many sockets of this process one person (None: the tenant's root token) holds: a
    count kept as sockets come and go, so a connection's quota check costs the same however
    many sockets the process holds."""
    return _open[tenant_id, person_id]


def untrack(consumer):
    if consumer in _consumers:
        _consumers.discard(consumer)
        owner = owner_of(consumer)
        _open[owner] -= 1
        if not _open[owner]:
            del _open[owner]


def _place_of(consumer) -> tuple[str, str]:
    tenant_id, person_id = owner_of(consumer)
    return shared_counts.key("sockets", tenant_id, person_id or "root"), f"{PROCESS}:{id(consumer)}"


async def take_place(consumer, limit: int) -> bool:
    """Whether `consumer` may be one more of its person's open sockets, counted from here if so.
    Host-wide: in Redis when the host has one (every node's sockets), else in this process, which
    the front hands all of a tenant's connections to (ahp/front.py), so its count is the node's."""
    if settings.REDIS_URL:
        if not await shared_counts.claim(*_place_of(consumer), limit, PLACE_SECONDS):
            return False
    elif open_by(*owner_of(consumer)) >= limit:
        return False
    track(consumer)  # with no wait since the count: two sockets at once cannot both take the last place
    return True


async def leave_place(consumer) -> None:
    if consumer not in _consumers:
        return
    untrack(consumer)
    if settings.REDIS_URL:
        try:
            await shared_counts.release(*_place_of(consumer))
        except Exception as exc:  # Redis is down: the place lapses after PLACE_SECONDS
            logger.info("Could not free a socket's place in its person's count (%s)", exc)


async def renew_places() -> None:
    if settings.REDIS_URL:
        await shared_counts.renew([_place_of(c) for c in list(_consumers)], PLACE_SECONDS)


def is_layer_failure(exc):
    """An error of the channel layer's transport (Redis gone or restarting), not a bug."""
    try:
        from redis.exceptions import RedisError
    except ImportError:  # pragma: no cover - redis comes with channels-redis
        RedisError = OSError
    return isinstance(exc, (OSError, RedisError))


async def close_all(code):
    """The channel layer failed. Its group memberships may be gone with it (a restarted Redis
    keeps none), so a socket that seems fine may never hear of its channels again: every socket
    of this process is closed with `code`, its client reconnects and replays what it missed."""
    for consumer in list(_consumers):
        await consumer.abandon(code)


def ensure_started():
    loop = asyncio.get_running_loop()
    if _started.get("loop") is loop:
        return
    _started["loop"] = loop
    serve_from(loop)
    keep_process_alive()
    _started["tasks"] = [loop.create_task(heartbeat())]
    if isinstance(get_channel_layer(), InMemoryChannelLayer):
        _started["tasks"].append(loop.create_task(tail_action_log()))


def keep_process_alive():
    """While the running loop lives, this process's HostProcess row stays fresh: the turns it
    runs (and terminals it holds) are its own. A loop that ends with its work (a Celery task's)
    ends its renewal with it."""
    loop = asyncio.get_running_loop()
    if loop not in _renewing:
        _renewing[loop] = loop.create_task(renew_process_lease())


async def renew_process_lease():
    while True:
        try:
            await database_sync_to_async(do_mark_process_alive)(PROCESS)
        except Exception as exc:  # the database is down: renewed when it answers again
            logger.warning("Could not renew this process's lease (%s: %s)", exc.__class__.__name__, exc)
        await asyncio.sleep(HEARTBEAT_SECONDS)


async def heartbeat():
    while True:
        try:
            # Only rows of sockets still open here: a socket whose clean-up failed (the database
            # was down) goes stale, and the sweep closes it by the disconnect rule.
            open_ids = [c.connection_id for c in list(_consumers) if getattr(c, "connection_id", None)]
            await database_sync_to_async(do_mark_connections_seen)(PROCESS, open_ids)
            await renew_places()
            await close_revoked()
            await reread_stale_access()
            await catch_up_subscribers()
        except Exception:
            logger.exception("Could not refresh this process's connections")
        await asyncio.sleep(HEARTBEAT_SECONDS)


def _live_token_ids(token_ids):
    return set(ApiToken.live().filter(pk__in=token_ids).values_list("pk", flat=True))


async def close_revoked():
    """Sockets whose token stopped working close even when the news did not reach this process
    (an in-memory channel layer, revoked from a management command): the sockets are told at
    once through the channel layer, and this catches the rest within a heartbeat."""
    consumers = [c for c in list(_consumers) if getattr(c, "token_id", None)]
    if not consumers:
        return
    live = await database_sync_to_async(_live_token_ids)({c.token_id for c in consumers})
    for consumer in consumers:
        if consumer.token_id not in live:
            await consumer.close_revoked()


async def reread_stale_access():
    """On the embedded host no news of an access change made in another process reaches a socket
    (grants.liveness): one that stayed silent since re-reads its access here, so a demoted
    person's socket leaves the channels they may no longer read within a heartbeat."""
    if liveness.marks_path() is None:
        return  # the shared channel layer told them
    reading = liveness.current()
    for consumer in [c for c in list(_consumers) if getattr(c, "liveness_read", reading) != reading]:
        await consumer.reread_access()


class Heard:
    """What one socket has sent of one channel: every logged action numbered up to `complete`,
    and the numbers above it sent since (a channel's numbers are not contiguous, so a gap alone
    tells nothing). The heartbeat sends from the log whatever is missing above `complete`."""

    def __init__(self, complete):
        self.complete = complete
        self.above = set()

    def has(self, seq):
        return seq <= self.complete or seq in self.above

    def take(self, seq):
        """Whether the action numbered `seq` is still to be sent; if so it now counts as sent."""
        if self.has(seq):
            return False
        self.above.add(seq)
        return True

    def complete_to(self, seq):
        if seq > self.complete:
            self.complete = seq
            self.above = {s for s in self.above if s > seq}


CATCH_UP_ROWS = 1000


def _logged_beyond(tenant_id, completes):
    """(channel, seq) of the tenant's logged actions past each channel's number, in serverSeq
    order: numbers only, as nearly all of them reached their sockets through the layer."""
    beyond = Q()
    for channel, complete in completes.items():
        beyond |= Q(channel=channel, seq__gt=complete)
    return list(ActionLog.objects.filter(beyond, tenant_id=tenant_id).order_by("seq")
                .values_list("channel", "seq")[:CATCH_UP_ROWS])


def _logged_envelopes(tenant_id, seqs):
    return dict(ActionLog.objects.filter(tenant_id=tenant_id, seq__in=seqs).values_list("seq", "envelope"))


async def catch_up_subscribers():
    """Send each socket what the log holds beyond what it has heard on its channels: an action
    whose layer message was lost (a full channel, a layer restarting) reaches its subscriber
    within a heartbeat. One query per tenant with sockets here, and one more for the envelopes
    of the actions some socket missed."""
    consumers = [c for c in list(_consumers) if getattr(c, "heard", None)]
    completes = {}  # tenant id -> {channel: the lowest number every socket here heard up to}
    for consumer in consumers:
        tenant_completes = completes.setdefault(consumer.tenant.pk, {})
        for channel, heard in list(consumer.heard.items()):
            tenant_completes[channel] = min(tenant_completes.get(channel, heard.complete), heard.complete)
    for tenant_id, tenant_completes in completes.items():
        numbers = await database_sync_to_async(_logged_beyond)(tenant_id, tenant_completes)
        if not numbers:
            continue
        sockets = [c for c in consumers if c.tenant.pk == tenant_id]
        missed = {seq for consumer in sockets for seq in consumer.unheard(numbers)}
        envelopes = await database_sync_to_async(_logged_envelopes)(tenant_id, missed) if missed else {}
        for consumer in sockets:
            await consumer.catch_up(numbers, envelopes)


def _counters():
    return dict(ServerSeq.objects.values_list("tenant_id", "value"))


def _logged_after(last):
    """Each tenant's rows after the last one forwarded, in its serverSeq order, which is the
    order its actions committed in (numbers are taken under the tenant's counter lock)."""
    rows = []
    for tenant_id, newest in _counters().items():
        seen = last.get(tenant_id, 0)
        if newest > seen:
            rows += ActionLog.objects.filter(tenant_id=tenant_id, seq__gt=seen).order_by("seq").values(
                "seq", "tenant_id", "envelope", "process")[:500]
    return rows


async def tail_action_log():
    layer = get_channel_layer()
    last = await database_sync_to_async(_counters)()  # tenant -> the newest seq forwarded
    while True:
        await asyncio.sleep(TAIL_SECONDS)
        try:
            rows = await database_sync_to_async(_logged_after)(last)
        except Exception:
            logger.exception("Could not read the action log")
            continue
        for row in rows:
            last[row["tenant_id"]] = row["seq"]
            if row["process"] != PROCESS:
                env = row["envelope"]
                await layer.group_send(group_for(env["channel"], row["tenant_id"]), action_message([env]))
