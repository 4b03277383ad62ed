"""Orchestration: what session tools may create and send, counted per session tree in a
sliding window (the charges), and the session tools' writes that spend that budget."""
import math
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from grants.models import Principal
from kernel.refusals import Refused

from ..models import Chat, ChatBackend, OrchestrationCharge, PendingMessage, Session, Turn
from .chats import ChatOrigin, chat_updated, do_create_chat
from .pending import do_send_message
from .sessions import do_create_session, do_set_title

MAX_SPAWN_DEPTH = 3
ORCHESTRATION_WINDOW = timedelta(minutes=60)
ORCHESTRATION_LIMITS = {"session": 50, "chat": 50, "message": 100}
LIMIT_VERBS = {"session": "create more sessions", "chat": "create more chats", "message": "send more messages"}


@dataclass(frozen=True)
class Orchestration:
    """Where a session tool's call is charged: its calling session (None for a sessionless
    call, which spends no budget) and the tenant's switches."""

    session: Session | None = None
    enabled: bool = True
    scope: str = "tree"  # tree | session

    @property
    def charged(self) -> Session | None:
        """The session whose budget the call spends, or None when nothing is counted."""
        return self.session if self.enabled else None


def tree_id(session: Session) -> uuid.UUID:
    return session.root_id or session.id


def _check_depth(orchestration: Orchestration) -> None:
    session = orchestration.charged
    if session is not None and session.depth >= MAX_SPAWN_DEPTH:
        raise Refused(
            f"Refusing to create a session: recursion limit reached (max spawn depth {MAX_SPAWN_DEPTH}). "
            f"This session was itself created {session.depth} level(s) deep.", "conflict")


def _check_budget(orchestration: Orchestration, kind: str) -> None:
    """Refuse when the window is full. Locks the row the count belongs to (the tree's root, or
    the session) until the caller's transaction ends, so concurrent callers count one by one."""
    session = orchestration.charged
    if session is None:
        return
    per_session = orchestration.scope == "session"
    anchor = session.id if per_session else tree_id(session)
    locked = Session.objects.select_for_update().filter(pk=anchor).values_list("pk", flat=True).first()
    if locked is None:  # the root is gone: serialise on the calling session instead
        Session.objects.select_for_update().filter(pk=session.id).values_list("pk", flat=True).first()
    since = timezone.now() - ORCHESTRATION_WINDOW
    charges = OrchestrationCharge.objects.filter(kind=kind, created__gt=since,
                                                 **({"session": anchor} if per_session else {"tree": anchor}))
    used = charges.count()
    limit = ORCHESTRATION_LIMITS[kind]
    if used < limit:
        return
    oldest = charges.order_by("created").values_list("created", flat=True)[0]  # `used` counted it
    retry = max(1, math.ceil((oldest + ORCHESTRATION_WINDOW - timezone.now()).total_seconds()))
    what = "session" if per_session else "session tree"
    raise Refused(
        f"Refusing to {LIMIT_VERBS[kind]}: this {what} already used {used} of {limit} allowed in the last 60 minutes. "
        f"The limit applies to each {what} separately and frees up as older actions leave that window. "
        f"Retry after {retry} seconds, or turn off agent orchestration limits in settings.", "conflict")


def _charge(orchestration: Orchestration, kind: str) -> None:
    session = orchestration.charged
    if session is not None:
        OrchestrationCharge.objects.create(tenant_id=session.tenant_id, tree=tree_id(session), session=session.id,
                                           kind=kind)


@transaction.atomic
def do_tool_create_session(principal: Principal, orchestration: Orchestration, provider: str, title: str, prompt: str,
                           working_directories: Sequence[str] = (), config: dict[str, Any] | None = None,
                           owner: User | None = None) -> tuple[Session, Chat, Turn | PendingMessage | None]:
    """create_session (independent): a session below the caller's, titled, its first turn the
    prompt, owned by `owner` (the calling session's owner) or else `principal`'s person. Charged
    once it exists. Answers (session, its default chat, turn or pending)."""
    _check_depth(orchestration)
    _check_budget(orchestration, "session")
    session = do_create_session(principal, uuid.uuid4(), provider, working_directories, config,
                                parent=orchestration.session, owner=owner)
    do_set_title(principal, session, title)
    chat = session.chats.get(is_default=True)
    chat.modified = timezone.now()
    Chat.objects.filter(pk=chat.pk).update(title=title, modified=chat.modified)
    chat_updated(chat, chat.modified, title=title)
    turn, pending = do_send_message(principal, chat, prompt, model=(config or {}).get("model", ""))
    _charge(orchestration, "session")
    return session, chat, turn or pending


@transaction.atomic
def do_tool_create_chat(principal: Principal, orchestration: Orchestration, session: Session, title: str,
                        prompt: str | None = None, provider: str = "", source: ChatOrigin | None = None,
                        config: dict[str, Any] | None = None) -> tuple[Chat, Turn | PendingMessage | None]:
    """create_chat, or create_session with currentSession: a chat in `session`, on `provider`
    when that is not the session's own, with `config` as its own settings (its first turn on
    their model), its first turn the prompt. Charged once it exists. `source` names the calling
    chat and tool call: the new chat is a worker chat."""
    _check_budget(orchestration, "chat")
    chat = do_create_chat(principal, session, uuid.uuid4(), title, source)
    if (provider and provider != session.provider) or config:
        ChatBackend.objects.create(chat=chat, provider=provider if provider != session.provider else "",
                                   config=config or {})
    started = None
    if prompt:
        turn, pending = do_send_message(principal, chat, prompt, model=(config or {}).get("model", ""))
        started = turn or pending
    _charge(orchestration, "chat")
    return chat, started


@transaction.atomic
def do_tool_send_message(principal: Principal, orchestration: Orchestration, chat: Chat, text: str,
                         sender_chat: Chat | None = None) -> tuple[Turn | None, PendingMessage | None]:
    """send_message: one message, charged once however it is delivered."""
    _check_budget(orchestration, "message")
    sent = do_send_message(principal, chat, text, sender_chat=sender_chat)
    _charge(orchestration, "message")
    return sent
