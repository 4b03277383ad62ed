"""AHP state snapshots of the root, a session and a chat, read from the rows. Each must fit in
one message (1 MiB): what grows without bound is trimmed, and the rest paged."""
import json

from django.db.models import OuterRef, Q, Subquery

from grants.algebra import holds

from .models import ActiveClient, Chat, ChatBackend, ChatDraft, PendingMessage, Session, ToolCall, Turn, iso

# A session takes at most this many chats (sessions_app.actions.chats); a snapshot of an older
# session holding more lists its most recently modified ones, and its default chat.
MAX_CHATS_PER_SESSION = 1000
# A chat snapshot carries its newest ended turns up to this much JSON; fetchTurns pages the rest.
SNAPSHOT_TURN_BYTES = 512 * 1024


def status_after(last_turn_state):
    """In progress while a turn runs; otherwise error when the last turn ended in one."""
    return {"active": Session.IN_PROGRESS, "error": Session.ERROR}.get(last_turn_state, Session.IDLE)


def chat_status(chat):
    return status_after(chat.turns.order_by("-started").values_list("state", flat=True).first())


def chat_summary(chat, status=None):
    """`status` when the caller read it already (a session snapshot reads all its chats' at once)."""
    return {"resource": chat.uri, "title": chat.title, "status": chat_status(chat) if status is None else status,
            "modifiedAt": iso(chat.modified), "origin": chat.origin()}


def input_needed(session):
    """Open calls waiting on someone: a client's call it owes (toolClientExecution), a tool's
    question to the person (toolConfirmation)."""
    calls = ToolCall.objects.filter(
        Q(confirmation="asked") | ~Q(contributor_client_id=""),
        turn__chat__session=session, status="running", completed__isnull=True,
    ).select_related("turn").order_by("created")
    return [confirmation_request(c) if c.confirmation == "asked" else client_execution_request(c) for c in calls]


def client_execution_request(call):
    return {"kind": "toolClientExecution", "id": str(call.id), "chat": f"ahp-chat:/{call.turn.chat_id}",
            "turnId": str(call.turn_id), "clientId": call.contributor_client_id, "toolCall": call.state()}


def confirmation_request(call):
    return {"kind": "toolConfirmation", "id": str(call.id), "chat": f"ahp-chat:/{call.turn.chat_id}",
            "turnId": str(call.turn_id), "toolCall": call.state()}


def session_channel_status(session, needed):
    """The session channel's `status`: what the protocol's session reducer moves, i.e. the read
    and archived bits and input-needed while an entry awaits the person. A turn's activity is on
    the chat (`chats[].status`, chat/*) and the session list (root/sessionSummaryChanged)."""
    awaits_person = any(request["kind"] != "toolClientExecution" for request in needed)
    return session.wire_status & ~Session.ACTIVITY | (Session.INPUT_NEEDED if awaits_person else Session.IDLE)


def listed_chats(session):
    """The session's chats a client is shown, oldest first, each with its `last_turn_state`, and
    its default chat (or None): its 1000 most recently modified, and its default chat."""
    last_turn = Turn.objects.filter(chat=OuterRef("pk")).order_by("-started").values("state")[:1]
    listed = session.chats.filter(archived=False).annotate(last_turn_state=Subquery(last_turn))
    chats = list(listed.order_by("-modified")[:MAX_CHATS_PER_SESSION])
    default = next((c for c in chats if c.is_default), None)
    if default is None and len(chats) == MAX_CHATS_PER_SESSION:
        default = listed.filter(is_default=True).first()
        chats += [default] if default else []
    chats.sort(key=lambda c: (c.created, str(c.id)))
    return chats, default


def chat_catalogue(session):
    """The compact chat catalogue of the session's SessionSummary (`chats`, SessionChatSummary:
    resource, title, origin, status) and its `defaultChat`, as root/sessionSummaryChanged carries
    them whenever a chat's status changes: `chats` there replaces the client's whole catalogue."""
    chats, default = listed_chats(session)
    catalogue = {"chats": [{"resource": c.uri, "title": c.title, "origin": c.origin(),
                            "status": status_after(c.last_turn_state)} for c in chats]}
    if default:
        catalogue["defaultChat"] = default.uri
    return catalogue


def chat_catalogues(sessions):
    """chat_catalogue of each of `sessions` (a listSessions page), by session id, in one query."""
    last_turn = Turn.objects.filter(chat=OuterRef("pk")).order_by("-started").values("state")[:1]
    catalogues = {s.pk: {"chats": []} for s in sessions}
    for chat in (Chat.objects.filter(session__in=list(catalogues), archived=False)
                 .annotate(last_turn_state=Subquery(last_turn)).order_by("created", "id")):
        catalogue = catalogues[chat.session_id]
        catalogue["chats"].append({"resource": chat.uri, "title": chat.title, "origin": chat.origin(),
                                   "status": status_after(chat.last_turn_state)})
        if chat.is_default:
            catalogue["defaultChat"] = chat.uri
    return catalogues


def session_state(session, config_schema):
    """`config_schema`: the session's agent's (the caller knows the agents; this app does not)."""
    chats, default = listed_chats(session)
    needed = input_needed(session)
    state = {
        **{k: v for k, v in session.summary().items() if k not in ("resource", "createdAt", "modifiedAt")},
        "status": session_channel_status(session, needed),
        "lifecycle": "ready",
        "serverTools": session.server_tools,
        "activeClients": [c.to_wire() for c in ActiveClient.objects.filter(session=session).order_by("id")],
        "chats": [chat_summary(c, status_after(c.last_turn_state)) for c in chats],
        "inputNeeded": needed,
        "config": {"schema": config_schema, "values": session.config},
        "_meta": session.meta,
    }
    if default:
        state["defaultChat"] = default.uri
    return state


def turn_parts(turn, calls):
    parts = []
    for part in turn.response_parts:
        if part.get("kind") == "toolCall":
            call = calls.get(part["toolCallId"])
            if call is not None:
                parts.append({"kind": "toolCall", "toolCall": call.state()})
        else:
            parts.append(part)
    return parts


def wire_turn(turn, calls):
    wire = {"id": str(turn.id), "startedAt": iso(turn.started),
            "message": turn.message(), "responseParts": turn_parts(turn, calls)}
    if turn.state != "active":
        wire["state"] = turn.state
        if turn.ended:
            wire["duration"] = int((turn.ended - turn.started).total_seconds() * 1000)
        if turn.error is not None:
            wire["error"] = turn.error
    return wire


def turn_page(chat, before, limit):
    """fetchTurns: up to `limit` ended turns of `chat` before the turn `before` (None: the newest),
    oldest first, and whether older ones remain."""
    turns = Turn.objects.filter(chat=chat).exclude(state="active").order_by("-started", "-id")
    if before is not None:
        turns = turns.filter(Q(started__lt=before.started) | Q(started=before.started, id__lt=before.id))
    page = list(turns[: limit + 1])[::-1]
    older, page = page[:-limit], page[-limit:]
    calls = {str(c.id): c for c in ToolCall.objects.filter(turn__in=page)}
    return {"turns": [wire_turn(t, calls) for t in page], "hasMore": bool(older)}


def newest_within(items, budget):
    """The newest of `items` (oldest first) whose JSON together takes at most `budget` bytes."""
    kept = 0
    for item in reversed(items):
        budget -= len(json.dumps(item).encode())
        if budget < 0:
            break
        kept += 1
    return items[len(items) - kept:]


def chat_state(chat):
    turns = list(Turn.objects.filter(chat=chat).order_by("started"))
    calls = {str(c.id): c for c in ToolCall.objects.filter(turn__chat=chat)}
    state = {**chat_summary(chat), "turns": newest_within(
        [wire_turn(t, calls) for t in turns if t.state != "active"], SNAPSHOT_TURN_BYTES)}
    active = next((t for t in turns if t.state == "active"), None)
    if active:
        state["activeTurn"] = wire_turn(active, calls)
    pending = list(PendingMessage.objects.filter(chat=chat, status="pending").order_by("position", "created"))
    steering = next((p for p in pending if p.delivery == "steer"), None)
    if steering:
        state["steeringMessage"] = steering.to_wire()
    queued = [p.to_wire() for p in pending if p.delivery == "queue"]
    if queued:
        state["queuedMessages"] = queued
    folder = ChatBackend.objects.filter(chat=chat).exclude(working_directory="").values_list(
        "working_directory", flat=True).first()
    if folder:  # the chat's own folder (chat/workingDirectorySet); otherwise it works in its session's
        state["workingDirectories"] = [folder]
    draft = ChatDraft.objects.filter(chat=chat).values_list("message", flat=True).first()
    if draft is not None:
        state["draft"] = draft
    return state


def root_state(principal, agents, config, terminals=()):
    """RootState: `agents` as the agents registry lists them; `terminals` (TerminalInfo) those the
    principal may read; `config` ({schema, values}, credentials already masked) only for those
    who may read it."""
    state = {"agents": list(agents), "terminals": list(terminals)}
    if holds(principal.grants, "config:settings"):
        state["config"] = config
    return state
