"""This process's open sockets: counted per person (in Redis when the host has one, so the
quota holds host-wide), and closed all at once when the channel layer fails."""
import logging
import os
import weakref
from collections import Counter
from typing import Any, Protocol

from django.conf import settings
from redis.exceptions import RedisError

from grants.models import Principal, Tenant
from kernel import shared_counts

from .log import PROCESS

logger = logging.getLogger(__name__)

# How often this process renews what it holds: its sockets' rows and places, its lease on its turns.
HEARTBEAT_SECONDS = float(os.environ.get("AHP_HEARTBEAT_SECONDS", "5"))
# How long a socket's place in its person's shared count (Redis) outlives this process's last
# heartbeat: a node that died frees its people's places within this.
PLACE_SECONDS = 3 * HEARTBEAT_SECONDS


class Socket(Protocol):
    """What this process's duties read of a socket (ahp.protocol.consumer)."""

    tenant: Tenant
    principal: Principal

    async def abandon(self, code: int) -> None: ...


_consumers: "weakref.WeakSet[Any]" = weakref.WeakSet()  # the heartbeat keeps only their rows fresh
_open: Counter[tuple[int, int | None]] = Counter()  # (tenant pk, person pk or None) -> sockets held here


def open_sockets() -> list[Any]:
    """This process's open sockets, as they are now."""
    return list(_consumers)


def owner_of(consumer: Socket) -> tuple[int, int | None]:
    return consumer.tenant.pk, getattr(consumer.principal.person, "pk", None)


def track(consumer: Socket) -> None:
    if consumer not in _consumers:
        _consumers.add(consumer)
        _open[owner_of(consumer)] += 1


def open_by(tenant_id: int, person_id: int | None) -> int:
    """How many sockets of this process one person (None: the tenant's root token) holds: a
    count kept as sockets come and go, so a connection's quota check costs the same however
    many sockets the process holds."""
    return _open[tenant_id, person_id]


def untrack(consumer: Socket) -> None:
    if consumer in _consumers:
        _consumers.discard(consumer)
        owner = owner_of(consumer)
        _open[owner] -= 1
        if not _open[owner]:
            del _open[owner]


def _place_of(consumer: Socket) -> tuple[str, str]:
    tenant_id, person_id = owner_of(consumer)
    return shared_counts.key("sockets", tenant_id, person_id or "root"), f"{PROCESS}:{id(consumer)}"


async def take_place(consumer: Socket, limit: int) -> bool:
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


async def leave_place(consumer: Socket) -> None:
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
        await shared_counts.renew([_place_of(c) for c in open_sockets()], PLACE_SECONDS)


def is_layer_failure(exc: BaseException) -> bool:
    """An error of the channel layer's transport (Redis gone or restarting), not a bug."""
    return isinstance(exc, (OSError, RedisError))


async def close_all(code: int) -> None:
    """The channel layer failed. Its group memberships may be gone with it (a restarted Redis
    keeps none), so a socket that seems fine may never hear of its channels again: every socket
    of this process is closed with `code`, its client reconnects and replays what it missed."""
    for consumer in open_sockets():
        await consumer.abandon(code)
