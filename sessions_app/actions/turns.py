"""Turns of a chat: started by a person, begun from a queued message, ended by the agent."""
from django.db import transaction
from django.utils import timezone

from kernel.refusals import Refused

from ..events.log import publish
from ..models import Chat, Session, Turn, iso
from .checks import check_message_text, require, summary_changed, touch


@transaction.atomic
def do_start_turn(principal, chat, turn_id, text, client_id="", origin=None, model=""):
    require(principal, "chat:send", chat.session)
    if not isinstance(text, str):
        raise Refused("message.text must be a string.", "invalid")
    check_message_text(text)
    if Turn.objects.filter(id=turn_id).exists():
        raise Refused(f"Turn {turn_id} already exists.", "exists")
    if chat_busy(chat):
        raise Refused("A turn is already running in this chat.", "conflict")
    return begin_turn(chat, turn_id, text, principal.person, client_id=client_id, origin=origin, model=model)


def chat_busy(chat):
    return Turn.objects.select_for_update().filter(chat=chat, state="active").exists()


def begin_turn(chat, turn_id, text, sender, client_id="", origin=None, origin_kind="user", queued_message_id=None,
               model=""):
    session = chat.session
    turn = Turn.objects.create(id=turn_id, chat=chat, sender=sender, text=text, client_id=client_id,
                               origin_kind=origin_kind, model=model)
    session.status = Session.IN_PROGRESS
    touch(session, "status")
    Chat.objects.filter(pk=chat.pk).update(modified=session.modified)
    action = {"type": "chat/turnStarted", "turnId": str(turn.id), "startedAt": iso(turn.started),
              "message": turn.message()}
    if queued_message_id:
        action["queuedMessageId"] = queued_message_id
    publish(session.tenant_id, chat.uri, action, origin)
    chat_updated(chat, Session.IN_PROGRESS, session.modified)
    summary_changed(session, status=session.wire_status)
    return turn


def chat_updated(chat, status, modified):
    """A turn's start and end change the chat's summary in its session's list: say so there."""
    publish(chat.session.tenant_id, chat.session.uri, {
        "type": "session/chatUpdated", "chat": chat.uri, "changes": {"status": status, "modifiedAt": iso(modified)}})


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
        publish(session.tenant_id, chat.uri, {"type": "chat/responsePart", "turnId": str(turn.id), "part": part})
    if error is None:
        turn.state = "complete"
        action = {"type": "chat/turnComplete", "turnId": str(turn.id), "duration": duration}
    else:
        turn.state = "error"
        turn.error = {"errorType": "agentError", "message": error}
        action = {"type": "chat/error", "turnId": str(turn.id), "duration": duration, "error": turn.error}
    turn.save(update_fields=["state", "error", "ended", "response_parts"])
    publish(session.tenant_id, chat.uri, action)
    if not Turn.objects.filter(chat__session=session, state="active").exists():
        session.status = Session.ERROR if error else Session.IDLE
    touch(session, "status")
    Chat.objects.filter(pk=chat.pk).update(modified=session.modified)
    chat_updated(chat, Session.ERROR if error else Session.IDLE, session.modified)
    summary_changed(session, status=session.wire_status)
