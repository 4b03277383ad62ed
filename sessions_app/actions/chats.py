"""Chats of a session: created, renamed, archived, disposed; the draft a person composes in one."""
from django.db import transaction
from django.utils import timezone

from kernel.refusals import Refused

from ..events.log import publish, publish_many
from ..models import Chat, ChatDraft, iso
from ..state import MAX_CHATS_PER_SESSION, chat_summary
from .checks import MAX_TITLE_CHARS, check_quota, check_title, require, touch
from .sessions import do_set_title

TOO_MANY_CHATS = f"A session holds at most {MAX_CHATS_PER_SESSION} chats; delete one before making another."


def chat_updated(chat, modified, **changes):
    """Every change to a chat's summary (title, status) moves its modifiedAt: the session's
    catalogue hears both, so a client's copy never goes stale."""
    publish_many(chat.session.tenant_id, [chat_update(chat, modified, **changes)])


def chat_update(chat, modified, **changes):
    """session/chatUpdated as an item for publish_many, for a change that publishes more."""
    return chat.session.uri, {"type": "session/chatUpdated", "chat": chat.uri,
                              "changes": {**changes, "modifiedAt": iso(modified)}}, None


@transaction.atomic
def do_create_chat(principal, session, chat_id, title="", origin=None):
    require(principal, "chat:create", session)
    if Chat.objects.filter(id=chat_id).exists():
        raise Refused(f"Chat ahp-chat:/{chat_id} already exists.", "exists")
    check_quota(principal, "chat")
    if Chat.objects.filter(session=session).count() >= MAX_CHATS_PER_SESSION:
        raise Refused(TOO_MANY_CHATS, "conflict")
    origin = origin or {}
    chat = Chat.objects.create(
        id=chat_id, session=session, creator=principal.person, title=title[:MAX_TITLE_CHARS],
        origin_kind=origin.get("kind", "user"),
        origin_chat_id=origin.get("chat_id"), origin_turn_id=origin.get("turn_id", ""),
        origin_tool_call_id=origin.get("tool_call_id", ""),
    )
    touch(session)
    publish(session.tenant_id, session.uri, {"type": "session/chatAdded", "summary": chat_summary(chat)})
    return chat


@transaction.atomic
def do_dispose_chat(principal, chat):
    require(principal, "chat:dispose", chat.session)
    if chat.is_default:
        raise Refused("A session's default chat goes only with its session; dispose the session.", "conflict")
    session = chat.session
    uri = chat.uri
    chat.delete()
    touch(session)
    publish(session.tenant_id, session.uri, {"type": "session/chatRemoved", "chat": uri})


@transaction.atomic
def do_rename_chat(principal, chat, title):
    """A chat's title; the default chat's is also its session's."""
    require(principal, "session:rename", chat.session)
    if chat.is_default:
        do_set_title(principal, chat.session, title)
    else:
        check_title(title)
    chat.title, chat.modified = title, timezone.now()
    Chat.objects.filter(pk=chat.pk).update(title=title, modified=chat.modified)
    chat_updated(chat, chat.modified, title=title)


@transaction.atomic
def do_archive_chat(principal, chat):
    """A nested chat leaves its session's list (its session's main chat goes with the session:
    archive the session)."""
    require(principal, "chat:mark", chat.session)
    if chat.is_default:
        raise Refused("A session's main chat is archived with its session; archive the session.", "conflict")
    Chat.objects.filter(pk=chat.pk).update(archived=True, modified=timezone.now())
    session = chat.session
    touch(session)
    publish(session.tenant_id, session.uri, {"type": "session/chatRemoved", "chat": chat.uri})


@transaction.atomic
def do_set_chat_draft(principal, chat, draft, origin=None):
    """chat/draftChanged: the chat's draft becomes `draft` (a Message whose model is an id or
    {id}), or is cleared when None. A draft is not a change of the chat: modifiedAt stays."""
    require(principal, "chat:draft", chat.session)
    if draft is None:
        ChatDraft.objects.filter(chat=chat).delete()
        action = {"type": "chat/draftChanged"}
    else:
        ChatDraft.objects.update_or_create(chat=chat, defaults={
            "message": draft, "model": draft_model(draft) or "", "author": principal.person, "modified": timezone.now()})
        action = {"type": "chat/draftChanged", "draft": draft}
    publish(chat.session.tenant_id, chat.uri, action, origin)


def draft_model(draft):
    """A draft's model id (the draft names it as an id or {id}), or None."""
    model = draft.get("model")
    return model.get("id") if isinstance(model, dict) else model
