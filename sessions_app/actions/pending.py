"""Pending messages: what a busy chat is sent waits, then becomes its next turn."""
import uuid

from django.db import transaction

from ..events.log import publish
from ..models import Chat, PendingMessage
from .checks import check_message_text, require
from .turns import begin_turn, chat_busy


@transaction.atomic
def do_send_message(principal, chat, text, sender_chat=None, origin_kind="user", delivery="queue", model=""):
    """Deliver `text` into `chat` for the person `principal`: a turn at once when the chat is free,
    otherwise a queued message the chat takes as its next turn. Answers (turn, pending message),
    one of them None. Whoever gets a turn back runs it (tools_app.runtime.launch_turn)."""
    require(principal, "chat:send", chat.session)
    check_message_text(text)
    if not chat_busy(chat):
        return begin_turn(chat, uuid.uuid4(), text, principal.person, origin_kind=origin_kind, model=model), None
    pending = PendingMessage.objects.create(chat=chat, sender=principal.person, sender_chat=sender_chat, text=text,
                                            origin_kind=origin_kind, delivery=delivery)
    publish(chat.session.tenant_id, chat.uri, {"type": "chat/pendingMessageSet", "kind": pending.wire_kind,
                                               **pending.to_wire()})
    return None, pending


@transaction.atomic
def do_start_queued_turn(chat_id):
    """When a chat falls free, its oldest pending message becomes its next turn (or None)."""
    chat = Chat.objects.select_related("session").get(pk=chat_id)
    if chat_busy(chat):
        return None
    pending = (PendingMessage.objects.select_for_update().filter(chat=chat, status="pending")
               .order_by("-delivery", "created").first())  # steering before queued
    if pending is None:
        return None
    pending.status = "delivered"
    pending.save(update_fields=["status"])
    publish(chat.session.tenant_id, chat.uri,
            {"type": "chat/pendingMessageRemoved", "kind": pending.wire_kind, "id": str(pending.id)})
    return begin_turn(chat, uuid.uuid4(), pending.text, pending.sender, origin_kind=pending.origin_kind,
                      queued_message_id=str(pending.id))
