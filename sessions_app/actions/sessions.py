"""Sessions: created, disposed, renamed, marked, moved in their tree, and the tools they offer."""
import uuid
from collections.abc import Sequence
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from jsonschema import Draft202012Validator

from grants.models import Principal, Tenant
from kernel.refusals import Refused

from ..channels import ROOT, chat_at
from ..events.delivery import notify
from ..events.log import Action, Envelope, Origin, publish
from ..models import Chat, Session, SessionPlacement
from ..state import chat_catalogue
from .checks import MOVES_OFF, check_quota, check_title, check_working_directory, require, summary_changed, touch


def session_id_taken(session_id: object) -> str:
    """Session ids are unique host-wide, so one may be taken in another tenant: the refusal is the
    same wherever it is taken and says nothing of a session there."""
    return f"Session id {session_id} is taken; create the session with a new id."


def check_session_config(schema: dict[str, Any], values: dict[str, Any]) -> None:
    """The one check of a session's config against its agent's `schema`, whichever door sets it
    (createSession, session/configChanged)."""
    error = next(iter(sorted(Draft202012Validator(schema).iter_errors(values), key=lambda e: list(e.path))), None)
    if error is not None:
        raise Refused(f"Invalid config at /{'/'.join(map(str, error.absolute_path))}: {error.message}", "invalid")


@transaction.atomic
def do_create_session(principal: Principal, session_id: uuid.UUID | str, provider: str = "echo",
                      working_directories: Sequence[str] = (), config: dict[str, Any] | None = None,
                      parent: Session | None = None, schema: dict[str, Any] | None = None,
                      owner: User | None = None) -> Session:
    """`schema`: the session's agent's config schema, when the door knows it (createSession):
    the config is checked against it as session/configChanged checks a change. `owner`: who owns
    it when not the acting person (a session a tool makes is its calling session's owner's)."""
    require(principal, "session:create")
    if Session.objects.filter(id=session_id).exists():
        raise Refused(session_id_taken(session_id), "exists")
    check_quota(principal, "session")
    for directory in working_directories:
        check_working_directory(principal.tenant, directory)
    if schema is not None:
        check_session_config(schema, config or {})
    session = Session.objects.create(
        id=session_id, tenant=principal.tenant, provider=provider, owner=owner or principal.person,
        working_directories=list(working_directories), config=config or {},
        parent=parent, depth=parent.depth + 1 if parent else 0, root_id=parent.root_id if parent else None,
    )
    Chat.objects.create(session=session, is_default=True, creator=principal.person)
    # The summary as listSessions shows it: with its chats catalogue (the default chat) and defaultChat.
    notify(session.tenant_id, "root/sessionAdded", {"channel": ROOT,
                                                     "summary": {**session.summary(), **chat_catalogue(session)}})
    publish(session.tenant_id, session.uri, {"type": "session/ready"})
    return session


@transaction.atomic
def do_dispose_session(principal: Principal, session: Session) -> None:
    if not principal.may("session:*", session) and not (principal.person and session.owner_id == principal.person.pk):
        raise Refused("Only the session's owner can delete it.")
    uri, tenant_id = session.uri, session.tenant_id
    session.delete()
    notify(tenant_id, "root/sessionRemoved", {"channel": ROOT, "session": uri})


@transaction.atomic
def do_set_title(principal: Principal, session: Session, title: object, *, origin: Origin | None = None) -> None:
    """`title` as a client sent it, refused unless a string short enough."""
    require(principal, "session:rename", session)
    checked = check_title(title)
    set_session_title(session, checked, origin)
    summary_changed(session, title=checked)


def set_session_title(session: Session, title: str, origin: Origin | None = None) -> None:
    """The session's title written and session/titleChanged published; the caller tells the
    session list (root/sessionSummaryChanged) with whatever else changed with it."""
    session.title = title
    touch(session, "title")
    publish(session.tenant_id, session.uri, {"type": "session/titleChanged", "title": title}, origin)


@transaction.atomic
def do_set_flag(principal: Principal, session: Session, flag: str, value: object, *, origin: Origin | None = None) -> None:
    """session/isArchivedChanged and session/isReadChanged."""
    require(principal, "session:mark", session)
    if not isinstance(value, bool):
        raise Refused(f"{flag} must be true or false.", "invalid")
    field = {"isArchived": "archived", "isRead": "read"}[flag]
    setattr(session, field, value)
    touch(session, field)
    publish(session.tenant_id, session.uri, {"type": f"session/{flag}Changed", flag: value}, origin)
    summary_changed(session, status=session.wire_status)


@transaction.atomic
def do_set_server_tools(session: Session, tools: list[dict[str, Any]]) -> Envelope:
    """What the session offers its agent changed: store the whole new list and tell its
    subscribers. Answers the envelope published."""
    Session.objects.filter(pk=session.pk).update(server_tools=tools)
    session.server_tools = tools
    return publish(session.tenant_id, session.uri, {"type": "session/serverToolsChanged", "tools": tools})


def _subtree(session: Session) -> list[Session]:
    """`session` and every session nested below it."""
    found, frontier = [session], [session.pk]
    while frontier:
        children = list(Session.objects.filter(parent_id__in=frontier))
        found.extend(children)
        frontier = [c.pk for c in children]
    return found


def _siblings(tenant: Tenant, parent_id: uuid.UUID, excluding: Session) -> list[Session]:
    rows = (Session.objects.for_tenant(tenant).filter(parent_id=parent_id).exclude(pk=excluding.pk)
            .select_related("placement"))
    return sorted(rows, key=lambda s: (getattr(s, "placement", None) and s.placement.position or 0, s.created))


@transaction.atomic
def do_change_session_config(principal: Principal, session: Session, changes: object, schema: dict[str, Any],
                             replace: bool = False, *, origin: Origin | None = None) -> None:
    """session/configChanged: only the properties `schema` (the session's agent's) marks
    sessionMutable may change; the rest keep what the session started with."""
    require(principal, "session:configure", session)
    if not isinstance(changes, dict):
        raise Refused("session/configChanged needs a config that is an object.", "invalid")
    properties = schema.get("properties", {})
    for name in sorted(changes):
        if name not in properties:
            raise Refused(f"The session's agent has no setting {name}.", "invalid")
        if not properties[name].get("sessionMutable"):
            raise Refused(f"{name} is fixed when the session starts.", "invalid")
    kept = {k: v for k, v in session.config.items() if not properties.get(k, {}).get("sessionMutable")}
    values = {**kept, **changes} if replace else {**session.config, **changes}
    check_session_config(schema, values)
    session.config = values
    touch(session, "config")
    action: Action = {"type": "session/configChanged", "config": values if replace else changes}
    if replace:
        action["replace"] = True
    publish(session.tenant_id, session.uri, action, origin)
    summary_changed(session)


NO_DEFAULT_CHAT = "session/defaultChatChanged needs a defaultChat: every session here keeps a default chat."


@transaction.atomic
def do_set_default_chat(principal: Principal, session: Session, chat_uri: object, *, origin: Origin | None = None) -> None:
    """session/defaultChatChanged {defaultChat}: another of the session's chats becomes the one it
    opens on. The protocol lets the hint be cleared (no defaultChat); a session here always has
    one, so clearing is refused."""
    require(principal, "session:configure", session)
    if chat_uri is None:
        raise Refused(NO_DEFAULT_CHAT, "invalid")
    chat = chat_at(chat_uri, session.tenant) if isinstance(chat_uri, str) else None
    if chat is None or chat.session_id != session.id or chat.archived:
        raise Refused(f"{chat_uri} is not a chat of this session.", "invalid")
    session.chats.filter(is_default=True).exclude(pk=chat.pk).update(is_default=False)
    session.chats.filter(pk=chat.pk).update(is_default=True)
    touch(session)
    publish(session.tenant_id, session.uri, {"type": "session/defaultChatChanged", "defaultChat": chat.uri}, origin)


@transaction.atomic
def do_move_session(principal: Principal, session: Session, into: Session | None = None, after: Session | None = None,
                    independent: bool = False, moves_enabled: bool = True) -> Session:
    """Reorder a nested session among its siblings, nest it into another session (after one of
    that session's nested sessions, or last), or make it independent."""
    if not moves_enabled:
        raise Refused(MOVES_OFF, "conflict")
    require(principal, "session:write", session)
    if into is not None:
        require(principal, "session:write", into)
    if independent and (into is not None or after is not None):
        raise Refused("A session made independent has no place to go into or after.", "invalid")
    if not independent and into is None and after is None:
        raise Refused('Say where the session goes: into, after, or relationship "independent".', "invalid")
    if not independent and into is None and session.parent_id is None:
        raise Refused("Only a nested session can be reordered; name a session to move it into.", "conflict")
    subtree = _subtree(session)
    if into is not None and into.pk in {s.pk for s in subtree}:
        raise Refused("A session cannot move into itself or a session nested in it.", "conflict")
    parent = None if independent else (into if into is not None else session.parent)
    if after is not None and (after.pk == session.pk or after.parent_id != (parent.pk if parent else None)):
        raise Refused(f"{after.uri} is not nested in the session this one moves into.", "conflict")
    # Re-root the moved subtree: depth and root follow the new parent.
    shift = (parent.depth + 1 if parent else 0) - session.depth
    root_id = (parent.root_id or parent.pk) if parent else session.pk
    for row in subtree:
        Session.objects.filter(pk=row.pk).update(depth=row.depth + shift, root_id=root_id)
    Session.objects.filter(pk=session.pk).update(parent=parent)
    session.refresh_from_db()
    if parent is not None:
        order = _siblings(session.tenant, parent.pk, session)
        index = next((i + 1 for i, s in enumerate(order) if after and s.pk == after.pk), len(order))
        order.insert(index, session)
        for position, row in enumerate(order):
            SessionPlacement.objects.update_or_create(session=row, defaults={"position": position})
    else:
        SessionPlacement.objects.filter(session=session).delete()
    touch(session)
    summary_changed(session)
    return session


@transaction.atomic
def do_add_working_directory(principal: Principal, session: Session, directory: str, *, origin: Origin | None = None) -> None:
    """session/workingDirectorySet: the session's agent may work in `directory` too (a no-op when it
    already may); it must lie in the tenant's workspace root."""
    require(principal, "session:folders", session)
    check_working_directory(session.tenant, directory)
    session = Session.objects.select_for_update().get(pk=session.pk)
    if directory not in session.working_directories:
        session.working_directories = [*session.working_directories, directory]
    touch(session, "working_directories")
    publish(session.tenant_id, session.uri, {"type": "session/workingDirectorySet", "directory": directory}, origin)
    summary_changed(session, workingDirectories=list(session.working_directories))


@transaction.atomic
def do_remove_working_directory(principal: Principal, session: Session, directory: str,
                                *, origin: Origin | None = None) -> None:
    """session/workingDirectoryRemoved: the session's agent no longer works in `directory` (a no-op
    when it did not); a chat kept in that folder goes back to the session's first."""
    from ..models import ChatBackend

    require(principal, "session:folders", session)
    session = Session.objects.select_for_update().get(pk=session.pk)
    session.working_directories = [d for d in session.working_directories if d != directory]
    touch(session, "working_directories")
    moved = list(ChatBackend.objects.filter(chat__session=session, working_directory=directory).select_related("chat"))
    ChatBackend.objects.filter(pk__in=[b.pk for b in moved]).update(working_directory="")
    for backend in moved:
        backend.chat.session = session
        publish(session.tenant_id, backend.chat.uri, {"type": "chat/workingDirectoryRemoved", "directory": directory})
    publish(session.tenant_id, session.uri, {"type": "session/workingDirectoryRemoved", "directory": directory}, origin)
    summary_changed(session, workingDirectories=list(session.working_directories))
