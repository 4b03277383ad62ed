"""A session's active clients (announced, removed, released with the calls they still owe)
and the connections that hold them."""
import json
import uuid
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from typing import Any

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.utils import timezone

from grants.models import Principal, Tenant
from kernel.refusals import Refused
from kernel.rows import insert

from .. import queries
from ..events.log import Origin, publish
from ..events.numbering import current_seqs
from ..models import ActiveClient, ClientConnection, Session, ToolCall
from .checks import client_taken, require
from .tool_calls import failure, finish_call

# Announced tools travel in every session snapshot and activeClientSet: budgets that keep both
# well inside one message (1 MiB), whatever the clients send.
MAX_CLIENT_TOOL_BYTES = 128 * 1024
MAX_SESSION_TOOL_BYTES = 512 * 1024

# A socket opening: (tenant, client id, process, person, its socket's channel).
Opening = tuple[Tenant, str, str, User | None, str]


def json_bytes(value: object) -> int:
    return len(json.dumps(value).encode())


def _check_active_client(active_client: object, client_id: str) -> tuple[dict[str, Any], int]:
    """Refused unless `active_client` is a well-formed announcement within its budget; answers it and the size of its tools."""
    if not isinstance(active_client, dict):
        raise Refused("activeClient must be an object.", "invalid")
    if active_client.get("clientId") != client_id:
        raise Refused(f"A client may announce only itself ({client_id}).", "invalid")
    tools = active_client.get("tools")
    if not isinstance(tools, list) or not all(isinstance(t, dict) for t in tools):
        raise Refused("activeClient.tools must be an array of tool definitions.", "invalid")
    display_name = active_client.get("displayName", "")
    if not isinstance(display_name, str):
        raise Refused("activeClient.displayName must be a string.", "invalid")
    size = json_bytes(tools)
    if size > MAX_CLIENT_TOOL_BYTES:
        raise Refused(f"The tools {client_id} announced take {size} bytes; a client may announce at most "
                      f"{MAX_CLIENT_TOOL_BYTES} bytes of tool definitions.", "invalid")
    return active_client, size


def _check_session_tool_budget(session: Session, client_id: str, size: int) -> None:
    others = ActiveClient.objects.filter(session=session).exclude(client_id=client_id).values_list("tools", flat=True)
    total = size + sum(json_bytes(tools) for tools in others)
    if total > MAX_SESSION_TOOL_BYTES:
        raise Refused(f"The session's clients would announce {total} bytes of tool definitions; a session takes at "
                      f"most {MAX_SESSION_TOOL_BYTES}.", "invalid")


def _claimed_client(principal: Principal, session: Session, client_id: str) -> ActiveClient | None:
    """The session's ActiveClient row for `client_id`, locked, or None; refused when another
    person's connection claimed that client id here first."""
    row = ActiveClient.objects.select_for_update().filter(session=session, client_id=client_id).first()
    if row is not None and row.owner_id != principal.person_id:
        raise Refused(client_taken(client_id))
    return row


@transaction.atomic
def do_set_active_client(principal: Principal, session: Session, client_id: str, active_client: object,
                         *, origin: Origin | None = None) -> ActiveClient:
    """`active_client`: the announcement as the client sent it, refused unless well-formed."""
    require(principal, "session:attach", session)
    announcement, size = _check_active_client(active_client, client_id)
    _check_session_tool_budget(session, client_id, size)
    fields = {"display_name": announcement.get("displayName", ""), "tools": announcement["tools"],
              "customizations": announcement.get("customizations"), "release_at": None, "modified": timezone.now()}
    row = _claimed_client(principal, session, client_id)
    if row is None:
        try:
            with transaction.atomic():
                row = ActiveClient.objects.create(session=session, client_id=client_id, owner=principal.person,
                                                  **fields)
        except IntegrityError:
            # Another connection claimed it in the meantime: theirs if it is another person's.
            row = _claimed_client(principal, session, client_id)
    assert row is not None  # made here, or by the connection whose claim collided with this one
    for name, value in fields.items():
        setattr(row, name, value)
    row.save()
    publish(session.tenant_id, session.uri, {"type": "session/activeClientSet", "activeClient": row.to_wire()},
            origin)
    return row


def do_remove_active_client(principal: Principal, session: Session, connection_client_id: str, client_id: object,
                            *, origin: Origin | None = None) -> None:
    require(principal, "session:attach", session)
    if not isinstance(client_id, str) or client_id != connection_client_id:
        raise Refused(f"A client may remove only itself ({connection_client_id}).", "invalid")
    with transaction.atomic():
        row = _claimed_client(principal, session, client_id)
    if row is not None:
        do_release_client(row.pk, origin=origin)


@transaction.atomic
def do_release_client(active_client_pk: int, *, origin: Origin | None = None, only_if_due: bool = False) -> bool:
    """The client leaves the session: each call it still owes fails, its tools go with it."""
    rows = ActiveClient.objects.select_for_update().filter(pk=active_client_pk)
    if only_if_due:
        rows = rows.filter(release_at__lte=timezone.now())
    row = rows.select_related("session").first()
    if row is None:
        return False
    session = row.session
    alternatives = {
        t.get("name"): other.client_id
        for other in ActiveClient.objects.filter(session=session).exclude(pk=row.pk)
        for t in other.tools if isinstance(t, dict)
    }
    owed = ToolCall.objects.select_for_update().filter(
        turn__chat__session=session, contributor_client_id=row.client_id, completed__isnull=True
    ).select_related("turn")
    for call in owed:
        announced = call.tool_name  # a client's call carries the name it announced
        message = f"Client {row.client_id} disconnected before completing {call.tool_name}"
        text = message
        if announced in alternatives:
            text += (f". Client {alternatives[announced]} provides the same tool as "
                     f"{alternatives[announced]}__{announced}; you may try the call again with it.")
        finish_call(call, failure(call.tool_name, message, text))
    row.delete()
    publish(session.tenant_id, session.uri,
            {"type": "session/activeClientRemoved", "clientId": row.client_id}, origin)
    return True


def do_open_connections(openings: Iterable[Opening]) -> list[tuple[ClientConnection, int]]:
    """Connections opened, in one transaction however many (a burst of sockets opening starts
    together): each opening is (tenant, client id, process, person, its socket's channel) and
    answers (its connection, its tenant's newest serverSeq). A client that (re)connected has any
    place it kept in a session again. Three statements when no opening client kept a place (most
    sockets); publishes nothing."""
    opened = [ClientConnection(tenant=tenant, client_id=client_id, process=process, person=person, channel=channel)
              for tenant, client_id, process, person, channel in openings]
    with transaction.atomic():
        insert(*opened)
        client_ids = sorted({c.client_id for c in opened if c.client_id})
        if client_ids:
            whose = {(c.tenant_id, c.client_id, c.person_id) for c in opened}
            kept = [pk for pk, *owner in queries.places_of(client_ids, released_only=True) if tuple(owner) in whose]
            if kept:
                ActiveClient.objects.filter(pk__in=kept).update(release_at=None)
    seqs = current_seqs({c.tenant_id for c in opened})
    return [(c, seqs[c.tenant_id]) for c in opened]


def do_set_subscriptions(connection_id: uuid.UUID | str, subscriptions: Iterable[str]) -> None:
    """The channels a connection is subscribed to, kept so a change reaches the live sessions
    (tools_app.live). Publishes nothing."""
    ClientConnection.objects.filter(id=connection_id).update(subscriptions=sorted(subscriptions))


def do_close_connections(connection_ids: Iterable[uuid.UUID | str],
                         disconnect_timeout_ms: Callable[[int], int]) -> list[tuple[int, datetime]]:
    """Connections closed, in one transaction however many (a burst of sockets closing ends
    together). A client whose last connection closed keeps its places in sessions for
    `disconnect_timeout_ms(tenant_id)` milliseconds (0: released at once), asked only of a
    tenant with places to keep; answers (active client pk, due) pairs the caller schedules.
    Two statements when no closed client holds a place (most short-lived sockets)."""
    ids = list(connection_ids)
    if not ids:
        return []
    with transaction.atomic():
        # (tenant, client id, person) of named clients
        closed = {row for row in queries.delete_connections(ids) if row[1]}
        if not closed:
            return []
        client_ids = sorted({client_id for _, client_id, _ in closed})
        places = [(pk, (tenant_id, client_id, owner_id)) for pk, tenant_id, client_id, owner_id
                  in queries.places_of(client_ids) if (tenant_id, client_id, owner_id) in closed]
        if not places:
            return []  # clients that never joined a session
        # Kept only when no other connection of the same client and person is still open.
        still_open = set(ClientConnection.objects.filter(client_id__in=client_ids)
                         .values_list("tenant_id", "client_id", "person_id"))
        kept = [(pk, owner[0]) for pk, owner in places if owner not in still_open]
        timeouts = {tenant_id: disconnect_timeout_ms(tenant_id) for tenant_id in {t for _, t in kept}}
        now = timezone.now()
        due = {tenant_id: now + timedelta(milliseconds=ms) for tenant_id, ms in timeouts.items()}
        for tenant_id in due:
            ActiveClient.objects.filter(pk__in=[pk for pk, t in kept if t == tenant_id]).update(release_at=due[tenant_id])
    for pk in [pk for pk, tenant_id in kept if timeouts[tenant_id] == 0]:
        do_release_client(pk)
    return [(pk, due[tenant_id]) for pk, tenant_id in kept if timeouts[tenant_id] != 0]
