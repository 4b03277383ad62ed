"""AHP channel URIs: `ahp-root://`, `ahp-session:/<uuid>`, `ahp-chat:/<uuid>`."""
import uuid

from .models import CHAT_URI_PREFIX, SESSION_URI_PREFIX, Chat, Session

ROOT = "ahp-root://"


def parse(uri):
    """(kind, uuid) for a session or chat URI, ("root", None) for the root, else (None, None)."""
    if uri == ROOT:
        return "root", None
    for kind, prefix in (("session", SESSION_URI_PREFIX), ("chat", CHAT_URI_PREFIX)):
        if isinstance(uri, str) and uri.startswith(prefix):
            try:
                return kind, uuid.UUID(uri[len(prefix):])
            except ValueError:
                return None, None
    return None, None


def session_at(uri, tenant):
    """The tenant's session at `uri`, or None: another tenant's session is simply not there."""
    kind, key = parse(uri)
    if kind != "session":
        return None
    return Session.objects.for_tenant(tenant).filter(id=key).first()


def chat_at(uri, tenant):
    kind, key = parse(uri)
    if kind != "chat":
        return None
    return Chat.objects.for_tenant(tenant).select_related("session").filter(id=key).first()
