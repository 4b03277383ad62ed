"""`createResourceWatch` and its `ahp-resource-watch:/<uuid>` channel: a watch belongs to the
connection that made it, is subscribed to by it alone, and ends when it unsubscribes or goes.
While subscribed, the watched place is listed every AHP_RESOURCE_WATCH_SECONDS (as the file
commands read, tools_app.families.watched) and what changed is published as
`resourceWatch/changed`."""
import asyncio
import logging
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import transaction

from grants.models import Principal
from kernel.orm import database_sync_to_async
from kernel.refusals import Refused
from sessions_app import events
from sessions_app.channels import RESOURCE_WATCH_PREFIX as PREFIX
from sessions_app.events.catch_up import SentOfChannel
from tools_app.families import watched

from . import errors, subscriptions

if TYPE_CHECKING:
    from .consumer import AhpConsumer

logger = logging.getLogger(__name__)
MAX_WATCHES = 8  # per connection
MAX_CHANGES_PER_ACTION = 1000
TOO_MANY = f"This connection holds {MAX_WATCHES} resource watches, the most it may; unsubscribe from one first."


@dataclass
class Watch:
    channel: str
    root: str
    recursive: bool
    excludes: list
    includes: list
    seen: dict
    task: asyncio.Task | None = field(default=None)

    def state(self) -> dict:
        """ResourceWatchState."""
        return {"root": self.root, "recursive": self.recursive,
                **({"excludes": {"items": self.excludes}} if self.excludes else {}),
                **({"includes": {"items": self.includes}} if self.includes else {})}

    def listing(self, principal: Principal) -> dict:
        return watched.listing(principal, self.root, self.recursive, self.excludes, self.includes)


def patterns(params: dict, name: str) -> list:
    value = params.get(name)
    if value is None:
        return []
    items = value.get("items") if isinstance(value, dict) else None
    if not (isinstance(items, list) and len(items) <= 100 and all(isinstance(i, str) and i for i in items)):
        raise errors.RpcError(errors.INVALID_PARAMS, f"Invalid params: {name} must be {{items: [glob patterns]}}.")
    return items


async def create_resource_watch(consumer: "AhpConsumer", params: dict) -> dict:
    """CreateResourceWatchParams {uri, recursive?, excludes?, includes?} -> {channel}."""
    root = errors.require(params, "uri", str)
    recursive = params.get("recursive", False)
    if not isinstance(recursive, bool):
        raise errors.RpcError(errors.INVALID_PARAMS, "Invalid params: recursive must be a boolean.")
    excludes, includes = patterns(params, "excludes"), patterns(params, "includes")
    if len(consumer.watches) >= MAX_WATCHES:
        raise errors.RpcError(errors.CONFLICT, TOO_MANY)
    watch = Watch(f"{PREFIX}{uuid.uuid4()}", root, recursive, excludes, includes, {})
    watch.seen = await database_sync_to_async(watch.listing)(consumer.principal)
    consumer.watches[watch.channel] = watch
    return {"channel": watch.channel}


async def subscribe(consumer: "AhpConsumer", uri: str) -> dict:
    watch = consumer.watches.get(uri)
    if watch is None:  # another connection's watch, an ended one, or none at all
        raise errors.RpcError(errors.NOT_FOUND, f"No channel {uri} here.")
    await subscriptions.join(consumer, uri)
    from_seq = await database_sync_to_async(events.current_seq)(consumer.tenant.pk)
    consumer.heard.setdefault(uri, SentOfChannel(from_seq)).complete_to(from_seq)
    if watch.task is None:
        watch.task = asyncio.get_running_loop().create_task(follow(consumer, watch))
    return {"resource": uri, "state": watch.state(), "fromSeq": from_seq}


def release(consumer: "AhpConsumer", uri: str) -> None:
    """The watch at `uri` ends (its connection unsubscribed, or went)."""
    watch = consumer.watches.pop(uri, None)
    if watch is not None and watch.task is not None:
        watch.task.cancel()


def publish_changes(tenant_id: int, channel: str, items: list) -> None:
    with transaction.atomic():
        events.publish_many(tenant_id, [
            (channel, {"type": "resourceWatch/changed", "changes": {"items": items[i:i + MAX_CHANGES_PER_ACTION]}},
             None) for i in range(0, len(items), MAX_CHANGES_PER_ACTION)])


async def follow(consumer: "AhpConsumer", watch: Watch) -> None:
    """Lists the watched place every AHP_RESOURCE_WATCH_SECONDS and publishes what changed; a
    place the caller can no longer read (gone, or access lost) lists as nothing."""
    while True:
        await asyncio.sleep(settings.AHP_RESOURCE_WATCH_SECONDS)
        try:
            seen = await database_sync_to_async(watch.listing)(consumer.principal)
        except Refused:
            seen = {}
        except Exception:
            logger.exception("Listing the resource watch %s failed; it lists again", watch.channel)
            continue
        items = watched.changes(watch.seen, seen)
        watch.seen = seen
        if items:
            await database_sync_to_async(publish_changes)(consumer.tenant.pk, watch.channel, items)


COMMANDS = {"createResourceWatch": create_resource_watch}
