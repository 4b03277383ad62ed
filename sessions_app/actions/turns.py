"""Turns of a chat: started by a person, begun from a queued message, ended by the agent."""
import uuid
from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any, NamedTuple

from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from grants.models import Principal
from kernel.refusals import Refused
from kernel.rows import ITS_ROW, insert, update

from .. import queries
from ..events.log import PROCESS, Action, Item, Origin, publish, publish_many
from ..models import Chat, Session, Turn, iso
from ..state import chat_catalogue, chat_status
from .chats import chat_update, chat_updated
from .checks import check_message_text, require, summary_changed, touch
from .tool_calls import cancel_open_calls

RUNNER_GONE = ("This turn stopped because the host process running its agent ended before it finished; "
               "send your message again.")


# The client id of the turns the host begins for an attached agent's calls that find none running.
ENDPOINT_TURN_CLIENT_ID = "ahp-mcp"


@transaction.atomic
def do_start_turn(principal: Principal, chat: Chat, turn_id: uuid.UUID | str, text: object, client_id: str = "",
                  model: str = "", agent: str | None = None, *, origin: Origin | None = None) -> Turn:
    """`agent`: the message's AgentSelection uri, which must name the session's agent definition
    (its `agentDefinition`, fixed when the session starts)."""
    require(principal, "chat:send", chat.session)
    if not isinstance(text, str):
        raise Refused("message.text must be a string.", "invalid")
    check_message_text(text)
    running = (chat.session.config or {}).get("agentDefinition")
    if agent is not None and agent != running:
        raise Refused(f"message.agent names {agent}, but this session runs "
                      f"{f'agent definition {running}' if running else 'no agent definition'}; "
                      "its agent is fixed when the session starts.", "invalid")
    if Turn.objects.filter(id=turn_id).exists():
        raise Refused(f"Turn {turn_id} already exists.", "exists")
    if chat_busy(chat):
        raise Refused("A turn is already running in this chat.", "conflict")
    return begin_turn(chat, turn_id, text, principal.person, client_id=client_id, origin=origin, model=model)


def chat_busy(chat: Chat) -> bool:
    """Whether a turn runs in `chat`. The host's turn for an attached agent's calls (ahp/mcp) gives
    way while none of its calls is open: it ends now, and the agent's next call begins another."""
    for turn in Turn.objects.select_for_update().filter(chat=chat, state="active"):
        if turn.client_id != ENDPOINT_TURN_CLIENT_ID or turn.tool_calls.filter(completed__isnull=True).exists():
            return True
        do_end_turn(turn.pk)
    return False


def begin_turn(chat: Chat, turn_id: uuid.UUID | str, text: str, sender: User | None, client_id: str = "",
               origin: Origin | None = None, origin_kind: str = "user", queued_message_id: str | None = None,
               model: str = "") -> Turn:
    session = chat.session
    title = named_after(chat, text)
    # The process that begins a turn runs it: its lease lasts while that process lives.
    turn, = insert(Turn(id=turn_id, chat=chat, sender=sender, text=text, client_id=client_id,
                        origin_kind=origin_kind, model=model, runner=PROCESS))
    session.status = Session.IN_PROGRESS
    names_session = bool(title) and chat.is_default and Session.objects.filter(pk=session.pk, title="").update(
        title=title) == 1
    if names_session:
        session.title = title
    touch(session, "status")
    chat.modified = session.modified
    update(chat, "modified")
    action: Action = {"type": "chat/turnStarted", "turnId": str(turn.id), "startedAt": iso(turn.started),
              "message": turn.message()}
    if queued_message_id:
        action["queuedMessageId"] = queued_message_id
    named = {"title": title} if title else {}
    publish_many(session.tenant_id, [
        (chat.uri, action, origin),
        *([(session.uri, {"type": "session/titleChanged", "title": title}, None)] if names_session else []),
        chat_update(chat, session.modified, status=Session.IN_PROGRESS, **named)])
    summary_changed(session, status=session.wire_status, **({"title": title} if names_session else {}),
                    **chat_catalogue(session))
    return turn


DEFERRED_TITLE_CHARS = 50


def named_after(chat: Chat, text: object) -> str:
    """The deferred title strategy (a session's default, `titleStrategy` unset or `deferred`): a
    chat with no title is named after the message that starts its first turn, that message's first
    line cut at 50 characters, as VS Code's chat names a chat (`ChatModel.getDefaultTitle`). The
    default chat names its session too, unless the session already has a title. A title a client
    or a tool set is never replaced: the write is conditional on the title still being empty.
    Answers the title given, or "" when the chat keeps its own."""
    if chat.title or ((chat.session.config or {}).get("titleStrategy") or "deferred") != "deferred":
        return ""
    title = text.strip().split("\n", 1)[0].strip()[:DEFERRED_TITLE_CHARS].strip() if isinstance(text, str) else ""
    if not title or Turn.objects.filter(chat=chat).exists():
        return ""
    if chat.is_default and chat.session.title:
        return ""
    if Chat.objects.filter(pk=chat.pk, title="").update(title=title) != 1:
        return ""
    chat.title = title
    return title


def reply_part_id(turn: Turn) -> str:
    return f"{turn.id}-reply"


def add_to_reply(turn: Turn, text: str) -> Action | None:
    """`text` onto the turn's reply part: the part itself when there is none yet (chat/responsePart),
    else a chat/delta. Answers the action to publish, or None when nothing was added."""
    part_id = reply_part_id(turn)
    parts = [dict(p) for p in turn.response_parts]
    existing = next((p for p in parts if p.get("id") == part_id), None)
    if existing is None:
        part = {"kind": "markdown", "id": part_id, "content": text}
        turn.response_parts = [*parts, part]
        return {"type": "chat/responsePart", "turnId": str(turn.id), "part": part}
    if not text:
        return None
    existing["content"] += text
    turn.response_parts = parts
    return {"type": "chat/delta", "turnId": str(turn.id), "partId": part_id, "content": text}


@transaction.atomic
def do_stream_reply(turn_id: uuid.UUID | str, text: str) -> None:
    """A piece of the agent's reply as the model writes it (dropped once the turn was cancelled)."""
    turn = queries.locked_turn(turn_id)
    if turn is None or turn.state != "active" or not text:
        return
    action = add_to_reply(turn, text)
    if action is None:  # never for a piece with text
        return
    update(turn, "response_parts")
    publish(turn.chat.session.tenant_id, turn.chat.uri, action)


@transaction.atomic
def do_notify_turn(turn_id: uuid.UUID | str, sentences: Sequence[str]) -> None:
    """What the host tells a running turn's chat that is not the agent's reply (a server the turn
    runs without): a systemNotification part each, kept in the turn for later subscribers."""
    turn = queries.locked_turn(turn_id)
    if turn is None or turn.state != "active" or not sentences:
        return
    parts = [{"kind": "systemNotification", "content": sentence} for sentence in sentences]
    turn.response_parts = [*turn.response_parts, *parts]
    update(turn, "response_parts")
    publish_many(turn.chat.session.tenant_id, [
        (turn.chat.uri, {"type": "chat/responsePart", "turnId": str(turn.id), "part": part}, None) for part in parts])


def streamed_reply(turn: Turn) -> str | None:
    return next((p["content"] for p in turn.response_parts if p.get("id") == reply_part_id(turn)), None)


class AfterTurn(NamedTuple):
    """What an ended turn leaves to do: effects to carry out or drop, a pending message to start."""

    effects: bool
    pending: bool


@transaction.atomic
def do_end_turn(turn_id: uuid.UUID | str, response_text: str | None = None, error: str | None = None) -> AfterTurn | None:
    """Finish a turn with the agent's reply (a markdown part, or the rest of the one it streamed)
    or an error; answers its AfterTurn. A turn no longer active (cancelled or truncated meanwhile)
    keeps its end: the agent's late answer is dropped, and the answer is None (not known here)."""
    turn = queries.locked_turn(turn_id)
    if turn is None or turn.state != "active":  # truncated away, or cancelled
        return None
    reply: list[Item] = []  # the rest of the reply, published with the end
    if response_text is not None:
        streamed = streamed_reply(turn)
        rest = response_text[len(streamed):] if streamed and response_text.startswith(streamed) else response_text
        action = add_to_reply(turn, rest) if streamed is None or rest != response_text else None
        if action is not None:
            reply.append((turn.chat.uri, action, None))
    if error is None:
        finish_turn(turn, "complete", "chat/turnComplete", before=reply)
    else:
        turn.error = {"errorType": "agentError", "message": error}
        finish_turn(turn, "error", "chat/error", before=reply, error=turn.error)
    # Read in the ending's transaction, which holds the turn's row: a message queued meanwhile
    # either committed before (seen here) or waited for this row and found the chat free (it
    # began its turn itself).
    return AfterTurn(*queries.turn_leftovers(turn.pk, turn.chat_id))


@transaction.atomic
def do_cancel_turn(principal: Principal, chat: Chat, turn_id: uuid.UUID | str, *, origin: Origin | None = None) -> Turn:
    """A person stops the chat's running turn: the calls it still waits on end cancelled (their
    waiters wake with that result), the turn ends chat/turnCancelled. Whoever runs the agent
    interrupts it (tools_app.runtime.turns.interrupt_turn); what it answers after this is dropped."""
    require(principal, "chat:cancel", chat.session)
    turn = Turn.objects.select_for_update(of=ITS_ROW).select_related("chat__session").filter(
        chat=chat, id=turn_id, state="active").first()
    if turn is None:
        raise Refused(f"No turn {turn_id} is running in this chat.", "conflict")
    cancel_open_calls(turn)
    finish_turn(turn, "cancelled", "chat/turnCancelled", origin)
    return turn


def abandoned_turns(live_processes: Collection[str], started_before: datetime) -> "QuerySet[Turn, uuid.UUID]":
    """Ids of active turns whose runner is not among `live_processes` (a turn that just began
    may run on a process whose first renewal is still to come)."""
    return (Turn.objects.filter(state="active", started__lt=started_before).exclude(runner__in=live_processes)
            .values_list("id", flat=True))


@transaction.atomic
def do_end_abandoned_turn(turn_id: uuid.UUID | str, live_processes: Collection[str]) -> bool:
    """The process running the turn died: the calls it waits on end, then the turn, with
    chat/error saying so. Claimed by a conditional UPDATE, so however many sweeps find it, it
    ends once; a turn that ended meanwhile is left as it is. Answers whether it ended here."""
    claimed = Turn.objects.filter(pk=turn_id, state="active").exclude(runner__in=live_processes).update(state="error")
    if not claimed:
        return False
    turn = Turn.objects.select_related("chat__session").get(pk=turn_id)
    cancel_open_calls(turn, RUNNER_GONE)
    turn.error = {"errorType": "agentError", "message": RUNNER_GONE}
    finish_turn(turn, "error", "chat/error", error=turn.error)
    return True


def finish_turn(turn: Turn, state: str, action_type: str, origin: Origin | None = None, before: Sequence[Item] = (),
                **fields: Any) -> None:
    """End the active `turn` in `state` with `action_type`; the chat and session say so. The
    actions of `before` are published first, in the same numbering."""
    chat, session = turn.chat, turn.chat.session
    turn.state, turn.ended = state, timezone.now()
    duration = int((turn.ended - turn.started).total_seconds() * 1000)
    update(turn, "state", "error", "ended", "response_parts")
    status = Session.ERROR if state == "error" else Session.IDLE
    if not Turn.objects.filter(chat__session=session, state="active").exists():
        session.status = status
    touch(session, "status")
    chat.modified = session.modified
    update(chat, "modified")
    publish_many(session.tenant_id, [
        *before, (chat.uri, {"type": action_type, "turnId": str(turn.id), "duration": duration, **fields}, origin),
        chat_update(chat, session.modified, status=status)])
    summary_changed(session, status=session.wire_status, **chat_catalogue(session))


@transaction.atomic
def do_truncate_chat(principal: Principal, chat: Chat, turn_id: uuid.UUID | str | None = None,
                     *, origin: Origin | None = None) -> None:
    """chat/truncated (edit and resend): the turns after `turn_id` go (all of them without one),
    a running turn among them silently, and the chat is idle."""
    require(principal, "chat:truncate", chat.session)
    turns = Turn.objects.select_for_update().filter(chat=chat)
    if turn_id is not None:
        kept = turns.filter(id=turn_id).exclude(state="active").first()
        if kept is None:
            raise Refused(f"No ended turn {turn_id} in this chat.", "not_found")
        turns = turns.filter(Q(started__gt=kept.started) | Q(started=kept.started, id__gt=kept.id))
    running = turns.filter(state="active").first()
    if running is not None:  # the calls it waits on end, so their waiters and inputNeeded hear it
        cancel_open_calls(running)
    was_busy = running is not None
    turns.delete()
    session = chat.session
    publish(session.tenant_id, chat.uri, {"type": "chat/truncated", **({"turnId": str(turn_id)} if turn_id else {})},
            origin)
    if was_busy and not Turn.objects.filter(chat__session=session, state="active").exists():
        session.status = Session.IDLE
    touch(session, "status")
    Chat.objects.filter(pk=chat.pk).update(modified=session.modified)
    chat_updated(chat, session.modified, status=chat_status(chat))
    summary_changed(session, status=session.wire_status, **chat_catalogue(session))
