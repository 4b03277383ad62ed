"""A connection's subscriptions: who may read a channel, its snapshot, joining and leaving its
group, and the replay of the log a reconnecting client missed."""
import json
from typing import TYPE_CHECKING, Any

from django.db import transaction

from agents.registry import agent_infos
from grants.algebra import holds
from kernel.orm import database_sync_to_async
from sessions_app import actions, events, state
from sessions_app.channels import RESOURCE_WATCH_PREFIX, ROOT, annotations_session_at, chat_at, parse, session_at
from sessions_app.events.catch_up import SentOfChannel
from sessions_app.models import ActionLog, ActiveClient
from tools_app.config import HostConfig, config_schema, wire_values
from tools_app.families.resources import annotations_state
from tools_app.families.session.listing import session_config_schema
from tools_app.families.terminals.actions import end_orphans_of, root_terminals, terminal_at, terminals_seen
from tools_app.live import refresh_server_tools

from . import errors
from .errors import Params

if TYPE_CHECKING:
    from .access import AccessConsumer
    from .consumer import AhpConsumer


def may_subscribe(consumer: "AhpConsumer", uri: str) -> bool:
    kind, _ = parse(uri)
    tenant, principal = consumer.tenant, consumer.principal
    if kind == "root":
        return True
    if kind == "session":
        session = session_at(uri, tenant)
        return session is not None and principal.may("session:read", session)
    if kind == "chat":
        chat = chat_at(uri, tenant)
        return chat is not None and principal.may("chat:turns", chat.session)
    if kind == "annotations":
        session = annotations_session_at(uri, tenant)
        return session is not None and principal.may("session:read", session)
    if kind == "terminal":
        terminal = terminal_at(uri, tenant)
        return terminal is not None and principal.may("terminal:read", terminal.session)
    return False


def read_snapshot(consumer: "AhpConsumer", uri: str) -> Params:
    kind, _ = parse(uri)
    tenant = consumer.tenant
    if kind == "session":
        refresh_server_tools([session_at(uri, tenant)])
    elif kind == "root":
        end_orphans_of(tenant.pk)  # outside the snapshot's transaction, which then lists them exited
    with transaction.atomic():
        from_seq = events.snapshot_lock(tenant.pk)
        if kind == "root":
            config = {"schema": config_schema(), "values": wire_values(HostConfig.for_tenant(tenant))}
            snapshot = state.root_state(consumer.principal, agent_infos(), config,
                                        root_terminals(consumer.principal, tenant))
        elif kind == "session":
            session = session_at(uri, tenant)
            if session is None:  # ended since may_subscribe found it
                raise errors.RpcError(errors.NOT_FOUND, f"No channel {uri} here.")
            snapshot = state.session_state(session, session_config_schema(session.provider))
        elif kind == "annotations":
            snapshot = annotations_state(annotations_session_at(uri, tenant))
        elif kind == "terminal":
            terminal = terminal_at(uri, tenant)
            if terminal is None:  # disposed of since may_subscribe found it
                raise errors.RpcError(errors.NOT_FOUND, f"No channel {uri} here.")
            snapshot = terminal.state()
        else:
            snapshot = state.chat_state(chat_at(uri, tenant))
    return {"resource": uri, "state": snapshot, "fromSeq": from_seq}


async def frame_seen(consumer: "AhpConsumer", channel: str, frame: str) -> str:
    """An action frame as this subscriber may see it: a root/terminalsChanged lists only the
    terminals it may read (the log keeps the tenant's whole catalogue); any other is unchanged."""
    if channel != ROOT or "root/terminalsChanged" not in frame or holds(consumer.principal.grants, "terminal:read"):
        return frame
    payload = json.loads(frame)
    payload["params"] = await envelope_seen(consumer, payload["params"])
    return json.dumps(payload)


async def envelope_seen(consumer: "AhpConsumer", envelope: Params) -> Params:
    """`frame_seen` for an envelope read from the log."""
    if envelope.get("channel") != ROOT or holds(consumer.principal.grants, "terminal:read"):
        return envelope
    return await database_sync_to_async(terminals_seen)(consumer.principal, envelope)


def save_subscriptions(consumer: "AhpConsumer") -> None:
    if consumer.connection_id is not None:  # a connection not yet initialized has no row to keep them
        actions.do_set_subscriptions(consumer.connection_id, consumer.subscriptions)


async def join(consumer: "AhpConsumer", uri: str) -> None:
    if uri not in consumer.subscriptions:
        await consumer.channel_layer.group_add(events.group_for(uri, consumer.tenant.pk), consumer.channel_name)
        consumer.subscriptions.add(uri)
        await database_sync_to_async(save_subscriptions)(consumer)


async def leave(consumer: "AhpConsumer", uri: str) -> None:
    consumer.subscriptions.discard(uri)
    consumer.heard.pop(uri, None)
    await consumer.channel_layer.group_discard(events.group_for(uri, consumer.tenant.pk), consumer.channel_name)


async def subscribe_to(consumer: "AhpConsumer", uri: str) -> Params:
    # Join first, so nothing published between the snapshot and the join is missed.
    await join(consumer, uri)
    snapshot = await database_sync_to_async(read_snapshot)(consumer, uri)
    consumer.heard.setdefault(uri, SentOfChannel(snapshot["fromSeq"])).complete_to(snapshot["fromSeq"])
    return snapshot


async def try_subscribe(consumer: "AhpConsumer", uri: Any) -> Params | None:
    if isinstance(uri, str) and await database_sync_to_async(may_subscribe)(consumer, uri):
        return await subscribe_to(consumer, uri)
    return None


async def unsubscribe(consumer: "AhpConsumer", uri: str) -> None:
    if uri in consumer.subscriptions:
        await leave(consumer, uri)
        await database_sync_to_async(save_subscriptions)(consumer)
        if parse(uri)[0] == "session":
            await database_sync_to_async(leave_session)(consumer, uri)


def leave_session(consumer: "AhpConsumer", uri: str) -> None:
    """A client that unsubscribes from a session leaves it at once: its owed calls fail."""
    session = session_at(uri, consumer.tenant)
    row = session and ActiveClient.objects.filter(session=session, client_id=consumer.client_id,
                                                  owner_id=consumer.principal.person_id).first()
    if row:
        actions.do_release_client(row.pk)


async def drop_unreadable(consumer: "AccessConsumer") -> None:
    """Leave the channels the connection's (changed) grants no longer let it read (a resource
    watch checks the caller's access at each listing)."""
    unreadable = await database_sync_to_async(
        lambda: [uri for uri in consumer.subscriptions
                 if not uri.startswith(RESOURCE_WATCH_PREFIX) and not may_subscribe(consumer, uri)])()
    for uri in unreadable:
        await leave(consumer, uri)
    if unreadable:
        await database_sync_to_async(save_subscriptions)(consumer)


def replay_after(consumer: "AhpConsumer", last_seen: int, channels: list[str]) -> list[Params] | None:
    """Logged envelopes after `last_seen` on `channels`, or None when the log no longer reaches back."""
    log = ActionLog.objects.for_tenant(consumer.tenant)
    oldest = log.order_by("seq").values_list("seq", flat=True).first()
    if oldest is not None and oldest > last_seen + 1:
        return None
    if oldest is None and last_seen < events.current_seq(consumer.tenant.pk):
        return None
    rows = log.filter(seq__gt=last_seen, channel__in=channels).order_by("seq")
    return [terminals_seen(consumer.principal, row.envelope) for row in rows]


async def resume(consumer: "AhpConsumer", last_seen: int, wanted: list[Any]) -> Params:
    """`reconnect`'s answer: the missed envelopes of the readable channels, or fresh snapshots
    when the log no longer reaches back."""
    allowed: list[str] = []
    missing: list[Any] = []
    for uri in wanted:
        (allowed if await database_sync_to_async(may_subscribe)(consumer, uri) else missing).append(uri)
    replay = await database_sync_to_async(replay_after)(consumer, last_seen, allowed)
    if replay is None:
        snapshots = [await subscribe_to(consumer, uri) for uri in allowed]
        return {"type": "snapshot", "snapshots": snapshots}
    for uri in allowed:
        await join(consumer, uri)
    return {"type": "replay", "actions": replay, "missing": [u for u in missing if isinstance(u, str)]}
