"""Pending messages: what a busy chat is sent waits (a steering message, queued messages), then
becomes its next turn, as the protocol's "Pending Message Consumption" says."""
import uuid

from django.db import transaction
from django.db.models import Max

from grants.models import Principal
from kernel.refusals import Refused

from ..events.log import Action, Origin, publish
from ..models import Chat, PendingMessage, Turn
from .checks import check_message_text, require
from .turns import begin_turn, chat_busy

DELIVERY_OF_KIND = {"steering": "steer", "queued": "queue"}


def next_position(chat: Chat) -> int:
    return (PendingMessage.objects.filter(chat=chat, status="pending").aggregate(last=Max("position"))["last"] or 0) + 1


def pending_set_action(pending: PendingMessage) -> Action:
    return {"type": "chat/pendingMessageSet", "kind": pending.wire_kind, **pending.to_wire()}


@transaction.atomic
def do_send_message(principal: Principal, chat: Chat, text: str, sender_chat: Chat | None = None, origin_kind: str = "user",
                    delivery: str = "queue", model: str = "") -> tuple[Turn | None, PendingMessage | None]:
    """Deliver `text` into `chat` for the person `principal`: a turn at once when the chat is free,
    otherwise a queued message the chat takes as its next turn. Answers (turn, pending message),
    one of them None. Whoever gets a turn back runs it (tools_app.runtime.turns.launch_turn)."""
    require(principal, "chat:send", chat.session)
    check_message_text(text)
    if not chat_busy(chat):
        return begin_turn(chat, uuid.uuid4(), text, principal.person, origin_kind=origin_kind, model=model), None
    pending = PendingMessage.objects.create(chat=chat, sender=principal.person, sender_chat=sender_chat, text=text,
                                            origin_kind=origin_kind, delivery=delivery, position=next_position(chat))
    publish(chat.session.tenant_id, chat.uri, pending_set_action(pending))
    return None, pending


@transaction.atomic
def do_set_pending_message(principal: Principal, chat: Chat, message_id: uuid.UUID | str, kind: str, text: str,
                           *, origin: Origin | None = None) -> Turn | None:
    """chat/pendingMessageSet from a client: the chat's one steering message is replaced, a queued
    message updated in place or appended. An idle chat takes a queued message at once: answers the
    turn it began (the caller runs it), else None. A steering message waits for a turn ("Steering
    messages added while idle are silently stored and consumed when a turn becomes active")."""
    require(principal, "chat:send", chat.session)
    if kind not in DELIVERY_OF_KIND:
        raise Refused("chat/pendingMessageSet needs a kind that is steering or queued.", "invalid")
    check_message_text(text)
    delivery = DELIVERY_OF_KIND[kind]
    row = PendingMessage.objects.select_for_update().filter(id=message_id).first()
    if row is not None and (row.chat_id != chat.id or row.status != "pending" or row.delivery != delivery):
        raise Refused(f"Pending message {message_id} already exists.", "exists")
    if row is None:
        if delivery == "steer":  # the one steering message is replaced
            PendingMessage.objects.filter(chat=chat, status="pending", delivery="steer").update(status="cancelled")
        row = PendingMessage(id=message_id, chat=chat, sender=principal.person, delivery=delivery,
                             position=next_position(chat))
    else:
        row.revision += 1
    row.text = text
    row.save()
    publish(chat.session.tenant_id, chat.uri, pending_set_action(row), origin)
    return None if delivery == "steer" or chat_busy(chat) else consume(chat, row)


@transaction.atomic
def do_remove_pending_message(principal: Principal, chat: Chat, message_id: uuid.UUID | str, kind: str,
                              *, origin: Origin | None = None) -> None:
    """chat/pendingMessageRemoved from a client: the message will not be sent."""
    require(principal, "chat:send", chat.session)
    row = PendingMessage.objects.select_for_update().filter(
        chat=chat, id=message_id, status="pending", delivery=DELIVERY_OF_KIND.get(kind)).first()
    if row is None:
        raise Refused(f"No {kind} message {message_id} waits in this chat.", "not_found")
    row.status = "cancelled"
    row.save(update_fields=["status"])
    publish(chat.session.tenant_id, chat.uri,
            {"type": "chat/pendingMessageRemoved", "kind": row.wire_kind, "id": str(row.id)}, origin)


@transaction.atomic
def do_reorder_queued_messages(principal: Principal, chat: Chat, order: object, *, origin: Origin | None = None) -> None:
    """chat/queuedMessagesReordered: the ids in `order` first, in that order; ids not queued are
    ignored, queued ones `order` leaves out follow in their old order (a stale client drops none)."""
    require(principal, "chat:send", chat.session)
    if not isinstance(order, list) or not all(isinstance(i, str) for i in order):
        raise Refused("chat/queuedMessagesReordered needs an order that is an array of message ids.", "invalid")
    queued = {str(p.id): p for p in PendingMessage.objects.select_for_update().filter(
        chat=chat, status="pending", delivery="queue").order_by("position", "created")}
    wanted = list(dict.fromkeys(i for i in order if i in queued))
    final = wanted + [i for i in queued if i not in wanted]
    for position, message_id in enumerate(final, start=1):
        queued[message_id].position = position
    PendingMessage.objects.bulk_update(queued.values(), ["position"])
    publish(chat.session.tenant_id, chat.uri, {"type": "chat/queuedMessagesReordered", "order": final}, origin)


@transaction.atomic
def do_start_queued_turn(chat_id: uuid.UUID | str) -> Turn | None:
    """When a chat falls free, its pending message becomes its next turn (or None): the steering
    message first, then the queue in order."""
    chat = Chat.objects.select_related("session").get(pk=chat_id)
    if chat_busy(chat):
        return None
    pending = (PendingMessage.objects.select_for_update().filter(chat=chat, status="pending")
               .order_by("-delivery", "position", "created").first())  # "steer" sorts after "queue"
    return None if pending is None else consume(chat, pending)


def consume(chat: Chat, pending: PendingMessage) -> Turn:
    """The pending message leaves the chat's list and starts its next turn."""
    pending.status = "delivered"
    pending.save(update_fields=["status"])
    publish(chat.session.tenant_id, chat.uri,
            {"type": "chat/pendingMessageRemoved", "kind": pending.wire_kind, "id": str(pending.id)})
    return begin_turn(chat, uuid.uuid4(), pending.text, pending.sender, origin_kind=pending.origin_kind,
                      queued_message_id=str(pending.id))
