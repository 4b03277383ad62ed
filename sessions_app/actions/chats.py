"""Chats of a session: created, renamed, archived, disposed; the draft a person composes in one."""
import uuid
from datetime import datetime
from typing import Any, TypedDict

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from grants.models import Principal
from kernel.ids import parse_uuid
from kernel.refusals import Refused

from ..events.delivery import notify
from ..events.log import Action, Item, Origin, publish, publish_many
from ..models import Chat, ChatBackend, ChatDraft, ChatMove, Session, ToolCall, Turn, iso
from ..state import MAX_CHATS_PER_SESSION, chat_catalogue, chat_summary
from .checks import MAX_TITLE_CHARS, MOVES_OFF, check_quota, check_title, require, summary_changed, touch
from .sessions import set_session_title

TOO_MANY_CHATS = f"A session holds at most {MAX_CHATS_PER_SESSION} chats; delete one before making another."


class ChatOrigin(TypedDict, total=False):
    """Where a chat came from: a fork of a chat's turn, or a tool call that made a worker chat."""

    kind: str  # user | fork | tool
    chat_id: Any  # the source chat's id
    turn_id: str
    tool_call_id: str


def chat_updated(chat: Chat, modified: datetime, **changes: Any) -> None:
    """Every change to a chat's summary (title, status) moves its modifiedAt: the session's
    catalogue hears both, so a client's copy never goes stale."""
    publish_many(chat.session.tenant_id, [chat_update(chat, modified, **changes)])


def chat_update(chat: Chat, modified: datetime, **changes: Any) -> Item:
    """session/chatUpdated as an item for publish_many, for a change that publishes more."""
    return chat.session.uri, {"type": "session/chatUpdated", "chat": chat.uri,
                              "changes": {**changes, "modifiedAt": iso(modified)}}, None


@transaction.atomic
def do_create_chat(principal: Principal, session: Session, chat_id: uuid.UUID | str, title: str = "",
                   source: ChatOrigin | None = None) -> Chat:
    require(principal, "chat:create", session)
    if Chat.objects.filter(id=chat_id).exists():
        raise Refused(f"Chat ahp-chat:/{chat_id} already exists.", "exists")
    check_quota(principal, "chat")
    if Chat.objects.filter(session=session).count() >= MAX_CHATS_PER_SESSION:
        raise Refused(TOO_MANY_CHATS, "conflict")
    source = source or {}
    forked = fork_point(principal, session, source) if source.get("kind") == "fork" else None
    chat = Chat.objects.create(
        id=chat_id, session=session, creator=principal.person, title=title[:MAX_TITLE_CHARS],
        origin_kind=source.get("kind", "user"),
        origin_chat_id=source.get("chat_id"), origin_turn_id=source.get("turn_id", ""),
        origin_tool_call_id=source.get("tool_call_id", ""),
    )
    if forked is not None:
        copy_turns_through(forked, chat)
    touch(session)
    publish(session.tenant_id, session.uri, {"type": "session/chatAdded", "summary": chat_summary(chat)})
    summary_changed(session, **chat_catalogue(session))
    return chat


def fork_point(principal: Principal, session: Session, origin: ChatOrigin) -> Turn:
    """The ended turn of the source chat a fork copies through (ForkChatSource.turnId: "content
    through this turn is copied into the new chat's visible turns")."""
    require(principal, "chat:fork", session)
    turn_id = parse_uuid(origin.get("turn_id") or "")
    turn = turn_id and Turn.objects.filter(chat_id=origin["chat_id"], id=turn_id).exclude(state="active").first()
    if not turn:
        raise Refused(f"Invalid params: source.turnId {origin.get('turn_id') or '(none)'} is not an ended turn of "
                      f"ahp-chat:/{origin.get('chat_id')}.", "invalid")
    return turn


def do_copy_session_fork(principal: Principal, source: Session, turn_id: object, session: Session) -> None:
    """A forked session's default chat gets copies of the turns of `turn_id`'s chat (a chat of
    `source`) through that turn (SessionForkSource: "populated with the source session's content up
    to and including the specified turn's response")."""
    require(principal, "chat:fork", source)
    parsed = parse_uuid(turn_id) if isinstance(turn_id, str) else None
    turn = parsed and Turn.objects.filter(chat__session=source, id=parsed).exclude(state="active").first()
    if not turn:
        raise Refused(f"Invalid params: fork.turnId {turn_id} is not an ended turn of {source.uri}.", "invalid")
    copy_turns_through(turn, Chat.objects.get(session=session, is_default=True))


def copy_turns_through(last: Turn, chat: Chat) -> None:
    """Copies of the ended turns of `last`'s chat up to and including `last`, oldest first, into
    `chat`, each with copies of its tool calls (new ids, so each chat's calls stay its own)."""
    turns = list(Turn.objects.filter(chat_id=last.chat_id).exclude(state="active")
                 .filter(Q(started__lt=last.started) | Q(started=last.started, id__lte=last.id))
                 .order_by("started", "id"))
    calls: dict[uuid.UUID | None, list[ToolCall]] = {}
    for call in ToolCall.objects.filter(turn__in=turns):
        calls.setdefault(call.turn_id, []).append(call)
    for turn in turns:
        copy = Turn(chat=chat, sender_id=turn.sender_id, text=turn.text, origin_kind=turn.origin_kind,
                    client_id=turn.client_id, model=turn.model, state=turn.state, error=turn.error,
                    started=turn.started, ended=turn.ended)
        renamed: dict[str, uuid.UUID] = {}
        copied_calls = []
        for call in calls.get(turn.id, []):
            renamed[str(call.id)] = new_id = uuid.uuid4()
            call.pk, call.id, call.turn = new_id, new_id, copy
            call.waker, call.deadline = "", None
            copied_calls.append(call)
        copy.response_parts = [{**part, "toolCallId": str(renamed[part["toolCallId"]])}
                               if part.get("kind") == "toolCall" and part.get("toolCallId") in renamed else part
                               for part in turn.response_parts]
        copy.save(force_insert=True)
        ToolCall.objects.bulk_create(copied_calls)


@transaction.atomic
def do_dispose_chat(principal: Principal, chat: Chat) -> None:
    require(principal, "chat:dispose", chat.session)
    if chat.is_default:
        raise Refused("A session's default chat goes only with its session; dispose the session.", "conflict")
    session = chat.session
    uri = chat.uri
    chat.delete()
    touch(session)
    publish(session.tenant_id, session.uri, {"type": "session/chatRemoved", "chat": uri})
    summary_changed(session, **chat_catalogue(session))


@transaction.atomic
def do_rename_chat(principal: Principal, chat: Chat, title: str) -> None:
    """A chat's title; the default chat's is also its session's. The session list hears the new
    title in the session's whole `chats` catalogue (root/sessionSummaryChanged, one per rename,
    with the session's `title` too when it is the default chat)."""
    session = chat.session
    require(principal, "session:rename", session)
    check_title(title)
    if chat.is_default:
        set_session_title(session, title)
    chat.title, chat.modified = title, timezone.now()
    Chat.objects.filter(pk=chat.pk).update(title=title, modified=chat.modified)
    chat_updated(chat, chat.modified, title=title)
    summary_changed(session, **({"title": title} if chat.is_default else {}), **chat_catalogue(session))


@transaction.atomic
def do_archive_chat(principal: Principal, chat: Chat) -> None:
    """A nested chat leaves its session's list (its session's main chat goes with the session:
    archive the session)."""
    require(principal, "chat:mark", chat.session)
    if chat.is_default:
        raise Refused("A session's main chat is archived with its session; archive the session.", "conflict")
    Chat.objects.filter(pk=chat.pk).update(archived=True, modified=timezone.now())
    session = chat.session
    touch(session)
    publish(session.tenant_id, session.uri, {"type": "session/chatRemoved", "chat": chat.uri})
    summary_changed(session, **chat_catalogue(session))


@transaction.atomic
def do_set_chat_draft(principal: Principal, chat: Chat, draft: dict[str, Any] | None,
                      *, origin: Origin | None = None) -> None:
    """chat/draftChanged: the chat's draft becomes `draft` (a Message whose model is an id or
    {id}), or is cleared when None. A draft is not a change of the chat: modifiedAt stays."""
    require(principal, "chat:draft", chat.session)
    if draft is None:
        ChatDraft.objects.filter(chat=chat).delete()
        action: Action = {"type": "chat/draftChanged"}
    else:
        ChatDraft.objects.update_or_create(chat=chat, defaults={
            "message": draft, "model": draft_model(draft) or "", "author": principal.person, "modified": timezone.now()})
        action = {"type": "chat/draftChanged", "draft": draft}
    publish(chat.session.tenant_id, chat.uri, action, origin)


def draft_model(draft: dict[str, Any]) -> str | None:
    """A draft's model id (the draft names it as an id or {id}), or None."""
    model = draft.get("model")
    return model.get("id") if isinstance(model, dict) else model


MOVE_DEFAULT_CHAT = "A session's default chat moves only with its session; move the session instead."
MOVE_INTO_ITSELF = "A chat cannot move under itself."
MOVE_SAME_SESSION = "The chat is already in that session; this host keeps no chat hierarchy to move it in."
MOVE_REQUEST_REUSED = "requestId {request_id} already names another move; send a new requestId."


def effective_provider(chat: Chat) -> str:
    backend = ChatBackend.objects.filter(chat=chat).values_list("provider", flat=True).first()
    return backend or chat.session.provider


@transaction.atomic
def do_move_chat(principal: Principal, chat: Chat, destination: Chat, request_id: str,
                 moves_enabled: bool = True) -> dict[str, Any]:
    """moveChat with a `chat` destination: `chat` (not a session's default chat, no turn running)
    leaves its session for `destination`'s, a session of the same tenant on the same agent. Chat
    URIs here do not name their session, so the chat keeps its URI, turns, pending messages and
    draft. The source session's subscribers hear session/chatRemoved, the destination's
    session/chatAdded, the session list both catalogues, and the chat's own subscribers
    chat/moved. A retry with the same requestId answers the first result."""
    if not moves_enabled:
        raise Refused(MOVES_OFF, "conflict")
    source, target = chat.session, destination.session
    require(principal, "chat:move", source)
    require(principal, "chat:move", target)
    done = ChatMove.objects.filter(tenant_id=source.tenant_id, request_id=request_id).first()
    if done is not None:
        if (done.chat_id, done.destination_chat_id) != (chat.id, destination.id):
            raise Refused(MOVE_REQUEST_REUSED.format(request_id=request_id), "invalid")
        return done.result
    if chat.is_default:
        raise Refused(MOVE_DEFAULT_CHAT, "invalid")
    if destination.pk == chat.pk:
        raise Refused(MOVE_INTO_ITSELF, "invalid")
    if source.pk == target.pk:
        raise Refused(MOVE_SAME_SESSION, "invalid")
    if chat.archived:
        raise Refused(f"{chat.uri} is archived; an archived chat stays in its session.", "invalid")
    provider, target_provider = effective_provider(chat), effective_provider(destination)
    if provider != target_provider:
        raise Refused(f"{chat.uri} runs on {provider} and {destination.uri} on {target_provider}; a chat moves only "
                      "to a chat of the same agent.", "invalid")
    if Turn.objects.filter(chat=chat, state="active").exists():
        raise Refused(f"A turn is running in {chat.uri}; move the chat once it ends.", "turn_in_progress")
    if Chat.objects.filter(session=target).count() >= MAX_CHATS_PER_SESSION:
        raise Refused(TOO_MANY_CHATS, "conflict")
    chat.session, chat.modified = target, timezone.now()
    Chat.objects.filter(pk=chat.pk).update(session=target, modified=chat.modified)
    touch(source)
    touch(target)
    publish_many(source.tenant_id, [
        (source.uri, {"type": "session/chatRemoved", "chat": chat.uri}, None),
        (target.uri, {"type": "session/chatAdded", "summary": chat_summary(chat)}, None),
    ])
    summary_changed(source, **chat_catalogue(source))
    summary_changed(target, **chat_catalogue(target))
    result = {"previousSession": source.uri, "previousChat": chat.uri, "session": target.uri, "chat": chat.uri,
              "movedChats": [{"previousChat": chat.uri, "chat": chat.uri}]}
    notify(source.tenant_id, "chat/moved", {"channel": chat.uri, **result})
    ChatMove.objects.create(tenant_id=source.tenant_id, request_id=request_id, chat_id=chat.id,
                            destination_chat_id=destination.id, result=result)
    return result


@transaction.atomic
def do_set_chat_working_directory(principal: Principal, chat: Chat, directory: str, *, origin: Origin | None = None) -> None:
    """chat/workingDirectorySet: the chat's agent works in `directory`, one of its session's. A chat
    here keeps one folder, so a folder it had before leaves its set first."""
    from .checks import check_working_directory

    session = chat.session
    require(principal, "session:folders", session)
    check_working_directory(session.tenant, directory)
    if directory not in session.working_directories:
        raise Refused(f"{directory} is not a working directory of this session; add it with "
                      "session/workingDirectorySet first.", "invalid")
    backend = ChatBackend.objects.select_for_update().filter(chat=chat).first()
    items: list[Item] = []
    if backend is not None and backend.working_directory not in ("", directory):
        items.append((chat.uri, {"type": "chat/workingDirectoryRemoved", "directory": backend.working_directory}, None))
    ChatBackend.objects.update_or_create(chat=chat, defaults={"working_directory": directory})
    items.append((chat.uri, {"type": "chat/workingDirectorySet", "directory": directory}, origin))
    publish_many(session.tenant_id, items)


@transaction.atomic
def do_remove_chat_working_directory(principal: Principal, chat: Chat, directory: str,
                                     *, origin: Origin | None = None) -> None:
    """chat/workingDirectoryRemoved: the chat no longer keeps `directory` (a no-op when it did not);
    it works in its session's first folder again, which stays the session's."""
    require(principal, "session:folders", chat.session)
    ChatBackend.objects.filter(chat=chat, working_directory=directory).update(working_directory="")
    publish(chat.session.tenant_id, chat.uri, {"type": "chat/workingDirectoryRemoved", "directory": directory}, origin)
