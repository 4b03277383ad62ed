"""Which harness conversation a chat's next turn resumes."""
import uuid

from django.db import IntegrityError, transaction

from kernel.orm import database_sync_to_async

from .models import HarnessConversation


@database_sync_to_async
def resumed_conversation(chat_id: uuid.UUID | str, provider: str) -> str | None:
    """The conversation id the chat's last turn on `provider` left, or None."""
    return HarnessConversation.objects.filter(chat_id=chat_id, provider=provider).values_list(
        "conversation_id", flat=True).first()


@database_sync_to_async
def do_keep_conversation(chat_id: uuid.UUID | str, provider: str, conversation_id: str) -> None:
    """The chat's turns on `provider` resume `conversation_id` from now on."""
    try:
        with transaction.atomic():
            HarnessConversation.objects.update_or_create(chat_id=chat_id, provider=provider,
                                                         defaults={"conversation_id": conversation_id})
    except IntegrityError:
        pass  # the chat was deleted meanwhile: there is nothing left to resume
