"""Per-person quotas: how many sessions and chats a person may keep, how many they may make a
minute, and how many sockets they may hold open. The operator sets them host-wide
(AHP_MAX_SESSIONS_PER_PERSON, AHP_MAX_CHATS_PER_PERSON, AHP_MAX_CREATIONS_PER_MINUTE,
AHP_MAX_CONNECTIONS_PER_PERSON); a tenant cannot raise its own. A tenant's root token counts
as one person."""
import math
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.utils import timezone

from grants.models import Tenant

from .models import Chat, Session

WINDOW = timedelta(minutes=1)


def sessions_full(limit):
    return (f"Refusing to create a session: you already have {limit} sessions that are not archived, the most "
            f"this host allows one person. Archive or delete one first.")


def chats_full(limit):
    return (f"Refusing to create a chat: you already have {limit} chats that are not archived, the most this "
            f"host allows one person. Archive or delete one first.")


def too_fast(limit, retry):
    return (f"Refusing to create more: you made {limit} sessions and chats in the last minute, the most this "
            f"host allows one person. Retry after {retry} seconds.")


def too_many_connections(limit):
    # A close frame's reason holds at most 123 bytes.
    return f"Refusing the connection: you already have {limit} open connections, the most this host allows one person."


def _lock(principal):
    """Serialise one person's creations, so two at once cannot both take the last place. NO KEY
    (PostgreSQL; SQLite serialises every writer anyway): a row lock that still lets rows naming
    the person or tenant be written meanwhile. FOR UPDATE blocked their foreign-key checks, and a
    socket opening or a client announcing itself, holding its tenant's counter, deadlocked with a
    creation waiting for that counter."""
    if principal.person is not None:
        get_user_model().objects.select_for_update(no_key=True).filter(pk=principal.person.pk).values_list("pk").first()
    else:
        Tenant.objects.select_for_update(no_key=True).filter(pk=principal.tenant.pk).values_list("pk").first()


def _sessions_of(principal):
    return Session.objects.filter(tenant=principal.tenant, owner=principal.person)


def _chats_of(principal):
    return Chat.objects.filter(session__tenant=principal.tenant, creator=principal.person, is_default=False)


def quota_problem(principal, kind):
    """The refusal sentence when `principal` may not create one more `kind` (session | chat) now,
    else None. Call inside the creating transaction: it locks the person until it ends."""
    _lock(principal)
    kept, limit, full = ((_sessions_of(principal), settings.AHP_MAX_SESSIONS_PER_PERSON, sessions_full)
                         if kind == "session" else (_chats_of(principal), settings.AHP_MAX_CHATS_PER_PERSON, chats_full))
    if kept.filter(archived=False).count() >= limit:
        return full(limit)
    since = timezone.now() - WINDOW
    made = [*_sessions_of(principal).filter(created__gt=since).values_list("created", flat=True),
            *_chats_of(principal).filter(created__gt=since).values_list("created", flat=True)]
    rate = settings.AHP_MAX_CREATIONS_PER_MINUTE
    if len(made) >= rate:
        retry = max(1, math.ceil((min(made) + WINDOW - timezone.now()).total_seconds()))
        return too_fast(rate, retry)
    return None
