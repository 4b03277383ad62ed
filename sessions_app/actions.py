"""Every change to sessions, chats, turns and tool calls: one `do_*` function each, which checks
the grant, writes in one transaction and publishes the AHP action(s) clients see."""
import json
import math
import uuid
from dataclasses import dataclass
from datetime import timedelta

from django.db import IntegrityError, transaction
from django.utils import timezone

from kernel.refusals import Refused
from sandbox.workspaces import OutsideWorkspace, checked_folder

from . import events
from .channels import ROOT
from .models import (
    ActiveClient, Chat, ChatBackend, ClientConnection, OrchestrationCharge, PendingMessage, Session, SessionPlacement,
    ToolCall, ToolsEndpoint, Turn, TurnEffect, iso,
)
from .quotas import quota_problem

MAX_TITLE_CHARS = 200
MAX_MESSAGE_CHARS = 128 * 1024  # a prompt or message a turn starts with, whoever sends it


def client_taken(client_id):
    return f"Client id {client_id} belongs to another person in this session."


def check_message_text(text):
    """Every door that starts a turn (turnStarted, createChat, send_message, wakeups) refuses so."""
    if not isinstance(text, str) or len(text) > MAX_MESSAGE_CHARS:
        raise Refused(f"A message is a string of at most {MAX_MESSAGE_CHARS} characters.", "invalid")


def check_working_directory(tenant, directory):
    """The real path of `directory`, refused unless it lies in the tenant's workspace root."""
    try:
        return checked_folder(tenant, directory)
    except OutsideWorkspace as outside:
        raise Refused(outside.sentence, "invalid") from None


def require(principal, grant, session=None):
    if not principal.may(grant, session):
        raise Refused(f"{principal.name} may not {grant} here")


def _check_quota(principal, kind):
    problem = quota_problem(principal, kind)
    if problem:
        raise Refused(problem, "conflict")


def _touch(session, *fields):
    session.modified = timezone.now()
    session.save(update_fields=["modified", *fields])


def _summary_changed(session, **changes):
    events.notify(session.tenant_id, "root/sessionSummaryChanged", {
        "channel": ROOT, "session": session.uri, "changes": {**changes, "modifiedAt": iso(session.modified)},
    })


# Sessions and chats ---------------------------------------------------------------------------

@transaction.atomic
def do_create_session(principal, session_id, provider="echo", working_directories=(), config=None, parent=None):
    require(principal, "session:create")
    if Session.objects.filter(id=session_id).exists():
        raise Refused(f"Session ahp-session:/{session_id} already exists.", "exists")
    _check_quota(principal, "session")
    for directory in working_directories:
        check_working_directory(principal.tenant, directory)
    session = Session.objects.create(
        id=session_id, tenant=principal.tenant, provider=provider, owner=principal.person,
        working_directories=list(working_directories), config=config or {},
        parent=parent, depth=parent.depth + 1 if parent else 0, root_id=parent.root_id if parent else None,
    )
    Chat.objects.create(session=session, is_default=True, creator=principal.person)
    events.notify(session.tenant_id, "root/sessionAdded", {"channel": ROOT, "summary": session.summary()})
    events.publish(session.tenant_id, session.uri, {"type": "session/ready"})
    return session


@transaction.atomic
def do_dispose_session(principal, session):
    if not principal.may("session:*", session) and not (principal.person and session.owner_id == principal.person.pk):
        raise Refused("Only the session's owner can delete it.")
    uri, tenant_id = session.uri, session.tenant_id
    session.delete()
    events.notify(tenant_id, "root/sessionRemoved", {"channel": ROOT, "session": uri})


@transaction.atomic
def do_create_chat(principal, session, chat_id, title="", origin=None):
    require(principal, "chat:create", session)
    if Chat.objects.filter(id=chat_id).exists():
        raise Refused(f"Chat ahp-chat:/{chat_id} already exists.", "exists")
    _check_quota(principal, "chat")
    origin = origin or {}
    chat = Chat.objects.create(
        id=chat_id, session=session, creator=principal.person, title=title[:MAX_TITLE_CHARS],
        origin_kind=origin.get("kind", "user"),
        origin_chat_id=origin.get("chat_id"), origin_turn_id=origin.get("turn_id", ""),
        origin_tool_call_id=origin.get("tool_call_id", ""),
    )
    _touch(session)
    from .state import chat_summary

    events.publish(session.tenant_id, session.uri, {"type": "session/chatAdded", "summary": chat_summary(chat)})
    return chat


@transaction.atomic
def do_dispose_chat(principal, chat):
    require(principal, "chat:dispose", chat.session)
    if chat.is_default:
        raise Refused("A session's default chat goes only with its session; dispose the session.", "conflict")
    session = chat.session
    uri = chat.uri
    chat.delete()
    _touch(session)
    events.publish(session.tenant_id, session.uri, {"type": "session/chatRemoved", "chat": uri})


@transaction.atomic
def do_set_title(principal, session, title, origin=None):
    require(principal, "session:rename", session)
    if not isinstance(title, str) or len(title) > MAX_TITLE_CHARS:
        raise Refused(f"A title is a string of at most {MAX_TITLE_CHARS} characters.", "invalid")
    session.title = title
    _touch(session, "title")
    events.publish(session.tenant_id, session.uri, {"type": "session/titleChanged", "title": title}, origin)
    _summary_changed(session, title=title)


@transaction.atomic
def do_set_flag(principal, session, flag, value, origin=None):
    """session/isArchivedChanged and session/isReadChanged."""
    require(principal, "session:mark", session)
    if not isinstance(value, bool):
        raise Refused(f"{flag} must be true or false.", "invalid")
    field = {"isArchived": "archived", "isRead": "read"}[flag]
    setattr(session, field, value)
    _touch(session, field)
    events.publish(session.tenant_id, session.uri, {"type": f"session/{flag}Changed", flag: value}, origin)
    _summary_changed(session, status=session.wire_status)


# Active clients ------------------------------------------------------------------------------

def _check_active_client(active_client, client_id):
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
    _check_active_client(active_client, client_id)
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
    events.publish(session.tenant_id, session.uri, {"type": "session/activeClientSet", "activeClient": row.to_wire()},
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
        announced = call.tool_name.split("__", 1)[-1]
        message = f"Client {row.client_id} disconnected before completing {call.tool_name}"
        text = message
        if announced in alternatives:
            text += (f". Client {alternatives[announced]} provides the same tool as "
                     f"{alternatives[announced]}__{announced}; you may try the call again with it.")
        _finish_call(call, failure(call.tool_name, message, text))
    row.delete()
    events.publish(session.tenant_id, session.uri,
                   {"type": "session/activeClientRemoved", "clientId": row.client_id}, origin)
    return True


# Connections ---------------------------------------------------------------------------------

def do_open_connection(tenant, client_id, process, person=None):
    """`person`'s client (re)connected: any place it kept in a session is its again."""
    with transaction.atomic():
        connection = ClientConnection.objects.create(tenant=tenant, client_id=client_id, process=process,
                                                     person=person)
        ActiveClient.objects.for_tenant(tenant).filter(client_id=client_id, owner=person).update(release_at=None)
    return connection


def do_close_connection(connection_id, disconnect_timeout_ms):
    """A connection closed. When it was its person's client's last, the client's places in
    sessions are kept for `disconnect_timeout_ms` (0: released at once); answers (active client
    pk, due) pairs the caller schedules."""
    with transaction.atomic():
        connection = ClientConnection.objects.select_for_update().filter(id=connection_id).first()
        if connection is None:
            return []
        connection.delete()
        if not connection.client_id or ClientConnection.objects.filter(
            tenant_id=connection.tenant_id, client_id=connection.client_id, person_id=connection.person_id
        ).exists():
            return []
        due = timezone.now() + timedelta(milliseconds=disconnect_timeout_ms)
        rows = ActiveClient.objects.filter(session__tenant_id=connection.tenant_id, client_id=connection.client_id,
                                           owner_id=connection.person_id)
        rows.update(release_at=due)
        pending = [(pk, due) for pk in rows.values_list("pk", flat=True)]
    if disconnect_timeout_ms == 0:
        for pk, _ in pending:
            do_release_client(pk)
        return []
    return pending


# Turns ---------------------------------------------------------------------------------------

@transaction.atomic
def do_start_turn(principal, chat, turn_id, text, client_id="", origin=None):
    require(principal, "chat:send", chat.session)
    if not isinstance(text, str):
        raise Refused("message.text must be a string.", "invalid")
    check_message_text(text)
    if Turn.objects.filter(id=turn_id).exists():
        raise Refused(f"Turn {turn_id} already exists.", "exists")
    if _chat_busy(chat):
        raise Refused("A turn is already running in this chat.", "conflict")
    return _begin_turn(chat, turn_id, text, principal.person, client_id=client_id, origin=origin)


def _chat_busy(chat):
    return Turn.objects.select_for_update().filter(chat=chat, state="active").exists()


def _begin_turn(chat, turn_id, text, sender, client_id="", origin=None, origin_kind="user", queued_message_id=None):
    session = chat.session
    turn = Turn.objects.create(id=turn_id, chat=chat, sender=sender, text=text, client_id=client_id,
                               origin_kind=origin_kind)
    session.status = Session.IN_PROGRESS
    _touch(session, "status")
    Chat.objects.filter(pk=chat.pk).update(modified=session.modified)
    action = {"type": "chat/turnStarted", "turnId": str(turn.id), "startedAt": iso(turn.started),
              "message": {"text": text, "origin": {"kind": origin_kind}}}
    if queued_message_id:
        action["queuedMessageId"] = queued_message_id
    events.publish(session.tenant_id, chat.uri, action, origin)
    _summary_changed(session, status=session.wire_status)
    return turn


@transaction.atomic
def do_send_message(principal, chat, text, sender_chat=None, origin_kind="user", delivery="queue"):
    """Deliver `text` into `chat` for the person `principal`: a turn at once when the chat is free,
    otherwise a queued message the chat takes as its next turn. Answers (turn, pending message),
    one of them None. Whoever gets a turn back runs it (tools_app.runtime.launch_turn)."""
    require(principal, "chat:send", chat.session)
    check_message_text(text)
    if not _chat_busy(chat):
        return _begin_turn(chat, uuid.uuid4(), text, principal.person, origin_kind=origin_kind), None
    pending = PendingMessage.objects.create(chat=chat, sender=principal.person, sender_chat=sender_chat, text=text,
                                            origin_kind=origin_kind, delivery=delivery)
    events.publish(chat.session.tenant_id, chat.uri, {"type": "chat/pendingMessageSet", "kind": pending.wire_kind,
                                                      **pending.to_wire()})
    return None, pending


@transaction.atomic
def do_start_queued_turn(chat_id):
    """When a chat falls free, its oldest pending message becomes its next turn (or None)."""
    chat = Chat.objects.select_related("session").get(pk=chat_id)
    if _chat_busy(chat):
        return None
    pending = (PendingMessage.objects.select_for_update().filter(chat=chat, status="pending")
               .order_by("-delivery", "created").first())  # steering before queued
    if pending is None:
        return None
    pending.status = "delivered"
    pending.save(update_fields=["status"])
    events.publish(chat.session.tenant_id, chat.uri,
                   {"type": "chat/pendingMessageRemoved", "kind": pending.wire_kind, "id": str(pending.id)})
    return _begin_turn(chat, uuid.uuid4(), pending.text, pending.sender, origin_kind=pending.origin_kind,
                       queued_message_id=str(pending.id))


@transaction.atomic
def do_end_turn(turn_id, response_text=None, error=None):
    """Finish a turn with the agent's reply (a markdown part) or an error."""
    turn = Turn.objects.select_for_update().select_related("chat__session").get(id=turn_id)
    if turn.state != "active":
        return
    chat, session = turn.chat, turn.chat.session
    turn.ended = timezone.now()
    duration = int((turn.ended - turn.started).total_seconds() * 1000)
    if response_text is not None:
        part = {"kind": "markdown", "id": f"{turn.id}-reply", "content": response_text}
        turn.response_parts = [*turn.response_parts, part]
        events.publish(session.tenant_id, chat.uri, {"type": "chat/responsePart", "turnId": str(turn.id), "part": part})
    if error is None:
        turn.state = "complete"
        action = {"type": "chat/turnComplete", "turnId": str(turn.id), "duration": duration}
    else:
        turn.state = "error"
        action = {"type": "chat/error", "turnId": str(turn.id), "duration": duration,
                  "error": {"errorType": "agentError", "message": error}}
    turn.save(update_fields=["state", "ended", "response_parts"])
    events.publish(session.tenant_id, chat.uri, action)
    if not Turn.objects.filter(chat__session=session, state="active").exists():
        session.status = Session.ERROR if error else Session.IDLE
    _touch(session, "status")
    _summary_changed(session, status=session.wire_status)


# Tool calls ----------------------------------------------------------------------------------

def failure(tool_name, message, text=None):
    return {"success": False, "pastTenseMessage": f"{tool_name} failed", "error": {"message": message},
            "content": [{"type": "text", "text": text or message}]}


def _call_action(call, action_type, origin=None, **fields):
    """A chat tool call action as a publish_many item."""
    action = {"type": action_type, "turnId": str(call.turn_id), "toolCallId": str(call.id), **fields}
    return (call.turn.chat.uri, action, origin)


def _ready_fields(call):
    fields = {"invocationMessage": call.invocation_message(), "toolInput": json.dumps(call.input),
              "confirmed": "not-needed"}
    if call.contributor:
        fields["contributor"] = call.contributor
    return fields


@transaction.atomic
def do_begin_tool_call(turn, tool_name, arguments, display_name="", client_id="", timeout_ms=0, source="",
                       call_id=None):
    """The agent calls a tool: the call shows in the chat, running; a client's call is also
    listed in the session's inputNeeded until it completes, or fails at its deadline."""
    turn = Turn.objects.select_related("chat__session").get(pk=turn.pk)
    now = timezone.now()
    deadline = now + timedelta(milliseconds=timeout_ms) if client_id and timeout_ms else None
    call = ToolCall.objects.create(id=call_id or uuid.uuid4(), turn=turn, tool_name=tool_name, display_name=display_name or tool_name,
                                   input=arguments, contributor_client_id=client_id, deadline=deadline,
                                   timeout_ms=timeout_ms if deadline else 0, created=now,
                                   source=source or ("client" if client_id else ""))
    turn.response_parts = [*turn.response_parts, {"kind": "toolCall", "toolCallId": str(call.id)}]
    turn.save(update_fields=["response_parts"])
    start = {"toolName": tool_name, "displayName": call.display_name}
    if call.contributor:
        start["contributor"] = call.contributor
    call.status = "running"
    call.save(update_fields=["status"])
    session = turn.chat.session
    items = [_call_action(call, "chat/toolCallStart", **start), _call_action(call, "chat/toolCallReady", **_ready_fields(call))]
    if client_id:
        from .state import client_execution_request

        items.append((session.uri, {"type": "session/inputNeededSet", "request": client_execution_request(call)}, None))
    events.publish_many(session.tenant_id, items)
    return call


def _finish_call(call, result, origin=None):
    """Complete a locked, open call (readying it first if it was still streaming)."""
    items = []
    if call.status == "streaming":
        items.append(_call_action(call, "chat/toolCallReady", **_ready_fields(call)))
    call.status = "completed"
    call.result = result
    call.completed = timezone.now()
    call.save(update_fields=["status", "result", "completed"])
    items.append(_call_action(call, "chat/toolCallComplete", origin, result=result))
    session = call.turn.chat.session
    if call.contributor_client_id:
        items.append((session.uri, {"type": "session/inputNeededRemoved", "id": str(call.id)}, None))
    events.publish_many(session.tenant_id, items)
    events.wake(f"toolcall.{call.id}", result)


def _locked_open_call(call_id):
    return (ToolCall.objects.select_for_update().select_related("turn__chat__session")
            .filter(id=call_id, completed__isnull=True).first())


@transaction.atomic
def do_complete_tool_call(call_id, result):
    """The host completes a call it ran. Answers False when the call was already complete."""
    call = _locked_open_call(call_id)
    if call is None:
        return False
    _finish_call(call, result)
    return True


@transaction.atomic
def do_refuse_tool_call(turn, tool_name, arguments, sentence):
    """A call the snapshot refused: shown complete and failed, naming no client, so the client
    is never asked and the chat shows exactly what the model saw."""
    call = do_begin_tool_call(turn, tool_name, arguments)
    result = failure(tool_name, sentence)
    _finish_call(_locked_open_call(call.id), result)
    return result


def _check_result(result):
    if not isinstance(result, dict) or not isinstance(result.get("success"), bool):
        raise Refused("result.success must be true or false.", "invalid")
    message = result.get("pastTenseMessage")
    if not isinstance(message, (str, dict)):
        raise Refused("result.pastTenseMessage must be a string or {markdown}.", "invalid")
    content = result.get("content", [])
    if not isinstance(content, list) or not all(
            isinstance(c, dict) and (c.get("type") != "text" or isinstance(c.get("text"), str)) for c in content):
        raise Refused("result.content must be an array of content items; a text item's text is a string.", "invalid")


def do_client_complete_tool_call(principal, client_id, chat, turn_id, tool_call_id, result, origin=None):
    with transaction.atomic():
        require(principal, "chat:tool", chat.session)
        _check_result(result)
        call = (ToolCall.objects.select_for_update().select_related("turn__chat__session")
                .filter(id=tool_call_id, turn_id=turn_id, turn__chat=chat).first())
        if call is None:
            raise Refused(f"No tool call {tool_call_id} in turn {turn_id} of this chat.", "not_found")
        if call.contributor_client_id != client_id:
            raise Refused(f"Tool call {tool_call_id} belongs to {call.contributor_client_id or 'the host'}, "
                          f"not {client_id}.")
        if call.completed is not None:
            raise Refused(f"Tool call {tool_call_id} is already complete.", "conflict")
        # Only the connection of the person who announced the client in this session answers for it.
        if not ActiveClient.objects.filter(session=chat.session, client_id=client_id,
                                           owner_id=principal.person_id).exists():
            raise Refused(client_taken(client_id))
        if call.deadline is None or call.deadline > timezone.now():
            _finish_call(call, result, origin)
            return
        # Past its deadline the call has failed, whether or not a waiter or the sweep got to it
        # yet: the timeout is its result (committed here), and this late one is refused.
        _finish_call(call, _timeout_failure(call))
    raise Refused(f"Tool call {tool_call_id} timed out before this result came.", "conflict")


def _timeout_failure(call):
    message = f"{call.tool_name} got no answer from {call.contributor_client_id} in {call.timeout_ms / 1000:g} s"
    return failure(call.tool_name, message)


@transaction.atomic
def do_expire_tool_call(call_id):
    """At its deadline a client's call fails. Idempotent: fires once, and never before."""
    call = _locked_open_call(call_id)
    if call is None or call.deadline is None or call.deadline > timezone.now():
        return False
    _finish_call(call, _timeout_failure(call))
    return True


# Session tools: orchestration limits ---------------------------------------------------------

MAX_SPAWN_DEPTH = 3
ORCHESTRATION_WINDOW = timedelta(minutes=60)
ORCHESTRATION_LIMITS = {"session": 50, "chat": 50, "message": 100}
LIMIT_VERBS = {"session": "create more sessions", "chat": "create more chats", "message": "send more messages"}


@dataclass(frozen=True)
class Orchestration:
    """Where a session tool's call is charged: its calling session (None for a sessionless
    call, which spends no budget) and the tenant's switches."""

    session: Session | None = None
    enabled: bool = True
    scope: str = "tree"  # tree | session

    @property
    def counted(self):
        return self.enabled and self.session is not None

    @property
    def tree_id(self):
        return self.session.root_id or self.session.id


def _check_depth(orchestration):
    if orchestration.counted and orchestration.session.depth >= MAX_SPAWN_DEPTH:
        raise Refused(
            f"Refusing to create a session: recursion limit reached (max spawn depth {MAX_SPAWN_DEPTH}). "
            f"This session was itself created {orchestration.session.depth} level(s) deep.", "conflict")


def _check_budget(orchestration, kind):
    """Refuse when the window is full. Locks the row the count belongs to (the tree's root, or
    the session) until the caller's transaction ends, so concurrent callers count one by one."""
    if not orchestration.counted:
        return
    per_session = orchestration.scope == "session"
    anchor = orchestration.session.id if per_session else orchestration.tree_id
    locked = Session.objects.select_for_update().filter(pk=anchor).values_list("pk", flat=True).first()
    if locked is None:  # the root is gone: serialise on the calling session instead
        Session.objects.select_for_update().filter(pk=orchestration.session.id).values_list("pk", flat=True).first()
    since = timezone.now() - ORCHESTRATION_WINDOW
    charges = OrchestrationCharge.objects.filter(kind=kind, created__gt=since,
                                                 **({"session": anchor} if per_session else {"tree": anchor}))
    used = charges.count()
    limit = ORCHESTRATION_LIMITS[kind]
    if used < limit:
        return
    oldest = charges.order_by("created").values_list("created", flat=True).first()
    retry = max(1, math.ceil((oldest + ORCHESTRATION_WINDOW - timezone.now()).total_seconds()))
    what = "session" if per_session else "session tree"
    raise Refused(
        f"Refusing to {LIMIT_VERBS[kind]}: this {what} already used {used} of {limit} allowed in the last 60 minutes. "
        f"The limit applies to each {what} separately and frees up as older actions leave that window. "
        f"Retry after {retry} seconds, or turn off agent orchestration limits in settings.", "conflict")


def _charge(orchestration, kind):
    if orchestration.counted:
        OrchestrationCharge.objects.create(tenant_id=orchestration.session.tenant_id, tree=orchestration.tree_id,
                                           session=orchestration.session.id, kind=kind)


# Session tools: what they do -----------------------------------------------------------------

@transaction.atomic
def do_tool_create_session(principal, orchestration, provider, title, prompt, working_directories=(), config=None):
    """create_session (independent): a session below the caller's, titled, its first turn the
    prompt. Charged once it exists. Answers (session, its default chat, turn or pending)."""
    _check_depth(orchestration)
    _check_budget(orchestration, "session")
    session = do_create_session(principal, uuid.uuid4(), provider, working_directories, config,
                                parent=orchestration.session)
    do_set_title(principal, session, title)
    chat = session.chats.get(is_default=True)
    Chat.objects.filter(pk=chat.pk).update(title=title)
    turn, pending = do_send_message(principal, chat, prompt)
    _charge(orchestration, "session")
    return session, chat, turn or pending


@transaction.atomic
def do_tool_create_chat(principal, orchestration, session, title, prompt=None, provider=""):
    """create_chat, or create_session with currentSession: a chat in `session`, on `provider`
    when that is not the session's own, its first turn the prompt. Charged once it exists."""
    _check_budget(orchestration, "chat")
    chat = do_create_chat(principal, session, uuid.uuid4(), title)
    if provider and provider != session.provider:
        ChatBackend.objects.create(chat=chat, provider=provider)
    started = None
    if prompt:
        turn, pending = do_send_message(principal, chat, prompt)
        started = turn or pending
    _charge(orchestration, "chat")
    return chat, started


@transaction.atomic
def do_tool_send_message(principal, orchestration, chat, text, sender_chat=None):
    """send_message: one message, charged once however it is delivered."""
    _check_budget(orchestration, "message")
    sent = do_send_message(principal, chat, text, sender_chat=sender_chat)
    _charge(orchestration, "message")
    return sent


@transaction.atomic
def do_rename_chat(principal, chat, title):
    """A chat's title; the default chat's is also its session's."""
    require(principal, "session:rename", chat.session)
    if chat.is_default:
        do_set_title(principal, chat.session, title)
    elif not isinstance(title, str) or len(title) > MAX_TITLE_CHARS:
        raise Refused(f"A title is a string of at most {MAX_TITLE_CHARS} characters.", "invalid")
    Chat.objects.filter(pk=chat.pk).update(title=title, modified=timezone.now())
    chat.title = title
    session = chat.session
    events.publish(session.tenant_id, session.uri,
                   {"type": "session/chatUpdated", "chat": chat.uri, "changes": {"title": title}})


@transaction.atomic
def do_archive_chat(principal, chat):
    """A nested chat leaves its session's list (its session's main chat goes with the session:
    archive the session)."""
    require(principal, "chat:mark", chat.session)
    if chat.is_default:
        raise Refused("A session's main chat is archived with its session; archive the session.", "conflict")
    Chat.objects.filter(pk=chat.pk).update(archived=True, modified=timezone.now())
    session = chat.session
    _touch(session)
    events.publish(session.tenant_id, session.uri, {"type": "session/chatRemoved", "chat": chat.uri})


@transaction.atomic
def do_add_turn_effect(principal, turn, kind, arguments):
    """Remember a change for when `turn` completes."""
    require(principal, "session:write", turn.chat.session)
    return TurnEffect.objects.create(turn=turn, kind=kind, arguments=arguments)


def pending_turn_effects(turn_id):
    """(apply, effects): the effects of an ended turn and whether it completed. Dropped ones
    are deleted here; applied ones by the caller once carried out."""
    turn = Turn.objects.filter(pk=turn_id).first()
    if turn is None or turn.state == "active":
        return False, []
    effects = list(TurnEffect.objects.filter(turn=turn).select_related("turn__chat__session").order_by("created"))
    if turn.state != "complete":
        TurnEffect.objects.filter(turn=turn).delete()
        return False, []
    return True, effects


@transaction.atomic
def do_set_session_workspace(effect, directory):
    """set_workspace carried out: the session works in `directory` from now on."""
    session = Session.objects.select_for_update().get(pk=effect.turn.chat.session_id)
    check_working_directory(session.tenant, directory)
    old = list(session.working_directories)
    session.working_directories = [directory]
    _touch(session, "working_directories")
    for gone in old:
        if gone != directory:
            events.publish(session.tenant_id, session.uri, {"type": "session/workingDirectoryRemoved", "directory": gone})
    events.publish(session.tenant_id, session.uri, {"type": "session/workingDirectorySet", "directory": directory})
    _summary_changed(session, workingDirectories=[directory])
    TurnEffect.objects.filter(pk=effect.pk).delete()


@transaction.atomic
def do_set_chat_folder(effect, directory):
    """isolate_session carried out: only the calling chat moves to `directory`, which the
    session's workspace now includes."""
    chat = effect.turn.chat
    session = Session.objects.select_for_update().get(pk=chat.session_id)
    check_working_directory(session.tenant, directory)
    ChatBackend.objects.update_or_create(chat=chat, defaults={"working_directory": directory})
    events.publish(session.tenant_id, chat.uri, {"type": "chat/workingDirectorySet", "directory": directory})
    if directory not in session.working_directories:
        session.working_directories = [*session.working_directories, directory]
        _touch(session, "working_directories")
        events.publish(session.tenant_id, session.uri, {"type": "session/workingDirectorySet", "directory": directory})
        _summary_changed(session, workingDirectories=list(session.working_directories))
    TurnEffect.objects.filter(pk=effect.pk).delete()


def drop_turn_effect(effect):
    TurnEffect.objects.filter(pk=effect.pk).delete()


def _subtree(session):
    """`session` and every session nested below it."""
    found, frontier = [session], [session.pk]
    while frontier:
        children = list(Session.objects.filter(parent_id__in=frontier))
        found.extend(children)
        frontier = [c.pk for c in children]
    return found


def _siblings(tenant, parent_id, excluding):
    rows = (Session.objects.for_tenant(tenant).filter(parent_id=parent_id).exclude(pk=excluding.pk)
            .select_related("placement"))
    return sorted(rows, key=lambda s: (getattr(s, "placement", None) and s.placement.position or 0, s.created))


@transaction.atomic
def do_move_session(principal, session, into=None, after=None, independent=False, moves_enabled=True):
    """Reorder a nested session among its siblings, nest it into another session (after one of
    that session's nested sessions, or last), or make it independent."""
    if not moves_enabled:
        raise Refused("Moving chats and sessions is turned off (chatMoves.enabled is false).", "conflict")
    require(principal, "session:write", session)
    if into is not None:
        require(principal, "session:write", into)
    if independent and (into is not None or after is not None):
        raise Refused("A session made independent has no place to go into or after.", "invalid")
    if not independent and into is None and after is None:
        raise Refused("Say where the session goes: into, after, or independent.", "invalid")
    if not independent and into is None and session.parent_id is None:
        raise Refused("Only a nested session can be reordered; name a session to move it into.", "conflict")
    subtree = _subtree(session)
    if into is not None and into.pk in {s.pk for s in subtree}:
        raise Refused("A session cannot move into itself or a session nested in it.", "conflict")
    parent = None if independent else (into if into is not None else session.parent)
    if after is not None and (after.pk == session.pk or after.parent_id != (parent.pk if parent else None)):
        raise Refused(f"{after.uri} is not nested in the session this one moves into.", "conflict")
    # Re-root the moved subtree: depth and root follow the new parent.
    shift = (parent.depth + 1 if parent else 0) - session.depth
    root_id = (parent.root_id or parent.pk) if parent else session.pk
    for row in subtree:
        Session.objects.filter(pk=row.pk).update(depth=row.depth + shift, root_id=root_id)
    Session.objects.filter(pk=session.pk).update(parent=parent)
    session.refresh_from_db()
    if parent is not None:
        order = _siblings(session.tenant, parent.pk, session)
        index = next((i + 1 for i, s in enumerate(order) if after and s.pk == after.pk), len(order))
        order.insert(index, session)
        for position, row in enumerate(order):
            SessionPlacement.objects.update_or_create(session=row, defaults={"position": position})
    else:
        SessionPlacement.objects.filter(session=session).delete()
    _touch(session)
    _summary_changed(session)
    return session


# The tools endpoint --------------------------------------------------------------------------

@transaction.atomic
def do_open_tools_endpoint(principal, session, api_token=None):
    """The session's tools endpoint token for `api_token` (acting as its person), or, without
    one, for the agent the host starts (acting as the person whose turn it answers). Opened on
    first use; asking again answers the same token."""
    require(principal, "session:write", session)
    rows = ToolsEndpoint.objects.select_for_update().filter(session=session)
    endpoint = rows.filter(api_token=api_token) if api_token is not None else rows.filter(api_token__isnull=True)
    existing = endpoint.first()
    if existing is not None:
        return existing
    try:
        with transaction.atomic():
            return ToolsEndpoint.open(session, api_token=api_token)
    except IntegrityError:  # the same holder asked at the same moment: theirs is the one
        return endpoint.first()
