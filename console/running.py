"""What runs now in a tenant, in words: each session's activity (waiting for a person, waiting for
a client, running, failed, idle), for the live page's index, the dashboard and the session admin."""
from typing import TYPE_CHECKING, TypedDict

from django.core.paginator import Paginator
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.utils import timezone

from grants.models import Tenant
from sessions_app.models import Session, ToolCall, Turn

if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations

PAGE_SIZE = 20

NEEDS_PERSON = "waiting for a person"
NEEDS_CLIENT = "waiting for a client"
RUNNING = "running"
FAILED = "last turn failed"
IDLE = "idle"


class Activity(TypedDict):
    """What `with_activity` annotates a session with."""
    needs_person: bool
    needs_client: bool
    running: bool


def _open_calls() -> QuerySet:
    return ToolCall.objects.filter(turn__chat__session=OuterRef("pk"), status="running", completed__isnull=True)


def with_activity(sessions: QuerySet[Session]) -> "QuerySet[WithAnnotations[Session, Activity]]":
    """Sessions annotated with what their activity words are read from, one query for a page."""
    return sessions.annotate(
        needs_person=Exists(_open_calls().filter(confirmation="asked")),
        needs_client=Exists(_open_calls().exclude(contributor_client_id="")),
        running=Exists(Turn.objects.filter(chat__session=OuterRef("pk"), state="active")),
    )


def activity(session: "WithAnnotations[Session, Activity]") -> str:
    """The words for a session from `with_activity`: the most pressing first."""
    if session.needs_person:
        return NEEDS_PERSON
    if session.needs_client:
        return NEEDS_CLIENT
    if session.running:
        return RUNNING
    if session.status & Session.ERROR:
        return FAILED
    return IDLE


def owner_name(session: Session) -> str:
    return session.owner.username if session.owner is not None else "the tenant's root token"


def index_row(session: "WithAnnotations[Session, Activity]") -> dict:
    return {"id": str(session.pk), "resource": session.uri, "title": session.title, "provider": session.provider,
            "owner": owner_name(session), "activity": activity(session), "needsPerson": session.needs_person,
            "modified": timezone.localtime(session.modified).strftime("%Y-%m-%d %H:%M:%S")}


def running_index(tenant: Tenant, query: str = "", page: int = 1) -> dict:
    """One page of the tenant's sessions, those waiting for a person first, then running ones,
    then the most recently changed; `query` matches the title, owner, provider or id."""
    sessions = with_activity(Session.objects.for_tenant(tenant).listed().select_related("owner"))
    query = query.strip()
    if query:
        sessions = sessions.filter(Q(title__icontains=query) | Q(owner__username__icontains=query)
                                   | Q(provider__iexact=query) | Q(id__startswith=query.lower()))
    sessions = sessions.order_by("-needs_person", "-running", "-modified", "-id")
    paged = Paginator(sessions, PAGE_SIZE).get_page(page)
    return {"items": [index_row(s) for s in paged], "page": paged.number, "pages": paged.paginator.num_pages,
            "count": paged.paginator.count, "query": query}


def running_turns(tenant: Tenant, limit: int = 20) -> QuerySet:
    """Turns running now, oldest first, with their chat, session and sender."""
    return (Turn.objects.filter(chat__session__tenant=tenant, state="active")
            .select_related("chat__session", "sender").defer("response_parts").order_by("started")[:limit])


def waiting_for_a_person(tenant: Tenant, limit: int = 20) -> QuerySet:
    """Tool calls whose question waits for a person's Allow or Deny, oldest first."""
    return (ToolCall.objects.for_tenant(tenant).filter(status="running", confirmation="asked", completed__isnull=True)
            .select_related("turn__chat__session", "turn__sender").order_by("created")[:limit])
