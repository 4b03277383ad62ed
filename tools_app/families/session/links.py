"""Naming sessions and chats to and from the model: `openLink`s
(`agent-host-session://<provider>/<session id>[?chat=<chat id>]`) and the URIs tools accept."""
from urllib.parse import parse_qs, urlparse

from kernel.ids import parse_uuid
from kernel.refusals import Refused
from sessions_app.actions import require
from sessions_app.models import CHAT_URI_PREFIX, SESSION_URI_PREFIX, Chat, Session

LINK_SCHEME = "agent-host-session"


def open_link(session, chat=None):
    link = f"{LINK_SCHEME}://{session.provider}/{session.id}"
    return f"{link}?chat={chat.id}" if chat is not None and not chat.is_default else link


def parse_reference(text):
    """(session id, chat id) named by a session URI, chat URI or open link; either may be None."""
    if not isinstance(text, str):
        return None, None
    if text.startswith(SESSION_URI_PREFIX):
        return parse_uuid(text[len(SESSION_URI_PREFIX):]), None
    if text.startswith(CHAT_URI_PREFIX):
        return None, parse_uuid(text[len(CHAT_URI_PREFIX):])
    if text.startswith(f"{LINK_SCHEME}://"):
        parsed = urlparse(text)
        chat = parse_qs(parsed.query).get("chat", [None])[0]
        return parse_uuid(parsed.path.strip("/")), parse_uuid(chat) if chat else None
    return parse_uuid(text), None


def not_found(text):
    return Refused(f"No session or chat {text} that you may read.", "not_found")


def resolve(principal, text):
    """The (session, chat) a reference names, among what `principal` may read; the chat is the
    session's default chat when the reference names only a session."""
    session_id, chat_id = parse_reference(text)
    visible = Session.objects.visible_to(principal)
    if chat_id is not None:
        chat = Chat.objects.select_related("session").filter(pk=chat_id, session__in=visible).first()
        if chat is None or (session_id is not None and chat.session_id != session_id):
            raise not_found(text)
        return chat.session, chat
    session = visible.filter(pk=session_id).first() if session_id else None
    if session is None:
        raise not_found(text)
    return session, session.chats.get(is_default=True)


def require_write(principal, session=None):
    """Every writing session tool first asks session:write of the person behind the turn."""
    require(principal, "session:write", session)
