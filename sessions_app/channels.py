"""AHP channel URIs: `ahp-root://`, `ahp-session:/<uuid>`, `ahp-chat:/<uuid>`, and a session's
annotations channel `ahp-session:/<uuid>/annotations`."""
import uuid

from grants.models import Tenant
from kernel.ids import parse_uuid

from .models import CHAT_URI_PREFIX, SESSION_URI_PREFIX, Chat, Session
from .queries import chat_in_tenant

ROOT = "ahp-root://"
ANNOTATIONS_SUFFIX = "/annotations"
TERMINAL_URI_PREFIX = "ahp-terminal:/"  # its rows are tools_app's (families/terminals)
RESOURCE_WATCH_PREFIX = "ahp-resource-watch:/"  # a connection's own channel (ahp/protocol/watches.py), no row


def parse(uri: object) -> tuple[str | None, uuid.UUID | None]:
    """(kind, uuid) for a session, chat or annotations URI (the uuid is its session's), ("root", None) for the root, else (None, None)."""
    if uri == ROOT:
        return "root", None
    if isinstance(uri, str) and uri.startswith(SESSION_URI_PREFIX) and uri.endswith(ANNOTATIONS_SUFFIX):
        kind, key = parse(uri[: -len(ANNOTATIONS_SUFFIX)])
        return ("annotations", key) if kind == "session" else (None, None)
    for kind, prefix in (("session", SESSION_URI_PREFIX), ("chat", CHAT_URI_PREFIX), ("terminal", TERMINAL_URI_PREFIX)):
        if isinstance(uri, str) and uri.startswith(prefix):
            key = parse_uuid(uri[len(prefix):])
            return (kind, key) if key is not None else (None, None)
    return None, None


def session_at(uri: object, tenant: Tenant) -> Session | None:
    """The tenant's session at `uri`, or None: another tenant's session is simply not there."""
    kind, key = parse(uri)
    if kind != "session":
        return None
    return Session.objects.for_tenant(tenant).filter(id=key).first()


def chat_at(uri: object, tenant: Tenant) -> Chat | None:
    """The tenant's chat at `uri` with its session (all but its published tools), or None: one
    statement (every action on a chat reads it)."""
    kind, key = parse(uri)
    if kind != "chat" or key is None:
        return None
    return chat_in_tenant(key, tenant.pk)


def annotations_uri(session: Session) -> str:
    return f"{session.uri}{ANNOTATIONS_SUFFIX}"


def annotations_session_at(uri: object, tenant: Tenant) -> Session | None:
    """The tenant's session whose annotations channel is `uri`, or None."""
    kind, key = parse(uri)
    if kind != "annotations":
        return None
    return Session.objects.for_tenant(tenant).filter(id=key).first()
