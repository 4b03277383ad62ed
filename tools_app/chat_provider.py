"""Which provider answers a chat: one the create tool made on another backend runs there (its
ChatBackend names it), any other on its session's. Every reader asks here."""
import uuid
from collections.abc import Iterable

from sessions_app.models import Chat, ChatBackend, Session


def answering(backend_provider: str | None, session: Session) -> str:
    """The provider of a chat of `session` whose ChatBackend names `backend_provider` (empty or
    None: it names none)."""
    return backend_provider or session.provider


def backend_providers(chat_ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, str]:
    """{chat id: provider} of those of `chat_ids` that run on a provider of their own: one read."""
    return dict(ChatBackend.objects.filter(chat__in=list(chat_ids)).exclude(provider="")
                .values_list("chat_id", "provider"))


def provider_of(chat: Chat) -> str:
    """The provider that answers `chat`."""
    return answering(backend_providers([chat.pk]).get(chat.pk), chat.session)


def other_harness(chat: Chat) -> str | None:
    """The provider that answers `chat` when it is not its session's (an agent of its own), else None."""
    provider = provider_of(chat)
    return provider if provider != chat.session.provider else None
