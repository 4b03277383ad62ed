"""Actions a socket missed, sent from the action log: what one socket has heard of each channel,
the heartbeat's catch-up of what the layer lost, and, without a shared channel layer, the tail
that forwards what other processes (the Celery worker) logged."""
import asyncio
import logging
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from channels.layers import get_channel_layer
from django.db.models import Q

from kernel.orm import database_sync_to_async

from ..models import ActionLog, ServerSeq
from .delivery import action_message, group_for
from .log import PROCESS, Envelope

logger = logging.getLogger(__name__)

TAIL_SECONDS = 0.2
CATCH_UP_ROWS = 1000


class SentOfChannel:
    """What one socket has sent of one channel: every logged action numbered up to `complete`,
    and the numbers above it sent since (a channel's numbers are not contiguous, so a gap alone
    tells nothing). The heartbeat sends from the log whatever is missing above `complete`."""

    def __init__(self, complete: int) -> None:
        self.complete = complete
        self.above: set[int] = set()

    def has(self, seq: int) -> bool:
        return seq <= self.complete or seq in self.above

    def take(self, seq: int) -> bool:
        """Whether the action numbered `seq` is still to be sent; if so it now counts as sent."""
        if self.has(seq):
            return False
        self.above.add(seq)
        return True

    def complete_to(self, seq: int) -> None:
        if seq > self.complete:
            self.complete = seq
            self.above = {s for s in self.above if s > seq}


def _logged_beyond(tenant_id: int, completes: Mapping[str, int]) -> list[tuple[str, int]]:
    """(channel, seq) of the tenant's logged actions past each channel's number, in serverSeq
    order: numbers only, as nearly all of them reached their sockets through the layer."""
    beyond = Q()
    for channel, complete in completes.items():
        beyond |= Q(channel=channel, seq__gt=complete)
    return list(ActionLog.objects.filter(beyond, tenant_id=tenant_id).order_by("seq")
                .values_list("channel", "seq")[:CATCH_UP_ROWS])


def _logged_envelopes(tenant_id: int, seqs: Collection[int]) -> dict[int, Envelope]:
    return dict(ActionLog.objects.filter(tenant_id=tenant_id, seq__in=seqs).values_list("seq", "envelope"))


async def catch_up_subscribers(sockets: Iterable[Any]) -> None:
    """Send each of `sockets` what the log holds beyond what it has heard on its channels: an
    action whose layer message was lost (a full channel, a layer restarting) reaches its
    subscriber within a heartbeat. One query per tenant with sockets here, and one more for the
    envelopes of the actions some socket missed."""
    consumers = [c for c in sockets if getattr(c, "heard", None)]
    completes: dict[int, dict[str, int]] = {}  # tenant id -> {channel: the lowest number every socket here heard up to}
    for consumer in consumers:
        tenant_completes = completes.setdefault(consumer.tenant.pk, {})
        for channel, heard in list(consumer.heard.items()):
            tenant_completes[channel] = min(tenant_completes.get(channel, heard.complete), heard.complete)
    for tenant_id, tenant_completes in completes.items():
        numbers = await database_sync_to_async(_logged_beyond)(tenant_id, tenant_completes)
        if not numbers:
            continue
        of_tenant = [c for c in consumers if c.tenant.pk == tenant_id]
        missed = {seq for consumer in of_tenant for seq in consumer.unheard(numbers)}
        envelopes = await database_sync_to_async(_logged_envelopes)(tenant_id, missed) if missed else {}
        for consumer in of_tenant:
            await consumer.catch_up(numbers, envelopes)


def _counters() -> dict[int, int]:
    return dict(ServerSeq.objects.values_list("tenant_id", "value"))


def _logged_after(last: Mapping[int, int]) -> list[Mapping[str, Any]]:
    """Each tenant's rows after the last one forwarded, in its serverSeq order, which is the
    order its actions committed in (numbers are taken under the tenant's counter lock)."""
    rows: list[Mapping[str, Any]] = []
    for tenant_id, newest in _counters().items():
        seen = last.get(tenant_id, 0)
        if newest > seen:
            rows += ActionLog.objects.filter(tenant_id=tenant_id, seq__gt=seen).order_by("seq").values(
                "seq", "tenant_id", "envelope", "process")[:500]
    return rows


async def tail_action_log() -> None:
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
