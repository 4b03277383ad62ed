"""A session's active clients (announced, removed, released with the calls they still owe)
and the connections that hold them."""
import json
from datetime import timedelta

from django.db import IntegrityError, transaction
from django.utils import timezone

from kernel.refusals import Refused

from ..events.log import publish
from ..models import ActiveClient, ClientConnection, ToolCall
from .checks import client_taken, require
from .tool_calls import failure, finish_call

# Announced tools travel in every session snapshot and activeClientSet: budgets that keep both
# well inside one message (1 MiB), whatever the clients send.
MAX_CLIENT_TOOL_BYTES = 128 * 1024
MAX_SESSION_TOOL_BYTES = 512 * 1024


def json_bytes(value):
    return len(json.dumps(value).encode())


def _check_active_client(active_client, client_id):
    """Refused unless `active_client` is a well-formed announcement within its budget; answers the size of its tools."""
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
    return size


def _check_session_tool_budget(session, client_id, size):
    others = ActiveClient.objects.filter(session=session).exclude(client_id=client_id).values_list("tools", flat=True)
    total = size + sum(json_bytes(tools) for tools in others)
    if total > MAX_SESSION_TOOL_BYTES:
        raise Refused(f"The session's clients would announce {total} bytes of tool definitions; a session takes at "
                      f"most {MAX_SESSION_TOOL_BYTES}.", "invalid")


def _claimed_client(principal, session, client_id):
    """The session's ActiveClient row for `client_id`, locked, or None; refused when another
    person's connection claimed that client id here first."""
    row = ActiveClient.objects.select_for_update().filter(session=session, client_id=client_id).first()
    if row is not None and row.owner_id != principal.person_id:
        raise Refused(client_taken(client_id))
    return row


@transaction.atomic
def do_set_active_client(principal, session, client_id, active_client, origin=None):
    require(principal, "session:attach", session)
    _check_session_tool_budget(session, client_id, _check_active_client(active_client, client_id))
    fields = {"display_name": active_client.get("displayName", ""), "tools": active_client["tools"],
              "customizations": active_client.get("customizations"), "release_at": None, "modified": timezone.now()}
    row = _claimed_client(principal, session, client_id)
    if row is None:
        try:
            with transaction.atomic():
                row = ActiveClient.objects.create(session=session, client_id=client_id, owner=principal.person,
                                                  **fields)
        except IntegrityError:
            # Another connection claimed it in the meantime: theirs if it is another person's.
            row = _claimed_client(principal, session, client_id)
    for name, value in fields.items():
        setattr(row, name, value)
    row.save()
    publish(session.tenant_id, session.uri, {"type": "session/activeClientSet", "activeClient": row.to_wire()},
            origin)
    return row


def do_remove_active_client(principal, session, connection_client_id, client_id, origin=None):
    require(principal, "session:attach", session)
    if client_id != connection_client_id:
        raise Refused(f"A client may remove only itself ({connection_client_id}).", "invalid")
    with transaction.atomic():
        row = _claimed_client(principal, session, client_id)
    if row is not None:
        do_release_client(row.pk, origin=origin)


@transaction.atomic
def do_release_client(active_client_pk, origin=None, only_if_due=False):
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


def do_open_connection(tenant, client_id, process, person=None):
    """`person`'s client (re)connected: any place it kept in a session is its again."""
    with transaction.atomic():
        connection = ClientConnection.objects.create(tenant=tenant, client_id=client_id, process=process,
                                                     person=person)
        ActiveClient.objects.for_tenant(tenant).filter(client_id=client_id, owner=person).update(release_at=None)
    return connection


def do_set_subscriptions(connection_id, subscriptions):
    """The channels a connection is subscribed to, kept so a change reaches the live sessions
    (tools_app.live). Publishes nothing."""
    ClientConnection.objects.filter(id=connection_id).update(subscriptions=sorted(subscriptions))


def do_close_connection(connection_id, disconnect_timeout_ms):
    """A connection closed. When it was its person's client's last, the client's places in
    sessions are kept for `disconnect_timeout_ms()` milliseconds (0: released at once), asked
    only when there are places to keep; answers (active client pk, due) pairs the caller schedules."""
    with transaction.atomic():
        connection = ClientConnection.objects.select_for_update().filter(id=connection_id).first()
        if connection is None:
            return []
        connection.delete()
        if not connection.client_id or ClientConnection.objects.filter(
            tenant_id=connection.tenant_id, client_id=connection.client_id, person_id=connection.person_id
        ).exists():
            return []
        rows = ActiveClient.objects.filter(session__tenant_id=connection.tenant_id, client_id=connection.client_id,
                                           owner_id=connection.person_id)
        kept = list(rows.values_list("pk", flat=True))
        if not kept:
            return []  # a client that never joined a session (most short-lived sockets)
        timeout_ms = disconnect_timeout_ms()
        due = timezone.now() + timedelta(milliseconds=timeout_ms)
        ActiveClient.objects.filter(pk__in=kept).update(release_at=due)
    if timeout_ms == 0:
        for pk in kept:
            do_release_client(pk)
        return []
    return [(pk, due) for pk in kept]
