"""Turn effects: changes a tool asks for, carried out only when its turn completes."""
import uuid
from typing import Any

from django.db import transaction

from grants.models import Principal

from ..events.log import publish
from ..models import ChatBackend, Session, Turn, TurnEffect
from .checks import check_working_directory, require, summary_changed, touch


@transaction.atomic
def do_add_turn_effect(principal: Principal, turn: Turn, kind: str, arguments: dict[str, Any]) -> TurnEffect:
    """Remember a change for when `turn` completes."""
    require(principal, "session:write", turn.chat.session)
    return TurnEffect.objects.create(turn=turn, kind=kind, arguments=arguments)


def pending_turn_effects(turn_id: uuid.UUID | str) -> tuple[bool, list[TurnEffect]]:
    """(apply, effects): the effects of an ended turn and whether it completed. Dropped ones
    are deleted here; applied ones by the caller once carried out."""
    turn = Turn.objects.filter(pk=turn_id).first()
    if turn is None or turn.state == "active":
        return False, []
    effects = list(TurnEffect.objects.filter(turn=turn).select_related("turn__chat__session").order_by("created"))
    if turn.state != "complete":
        TurnEffect.objects.filter(turn=turn).delete()
        return False, []
    return True, effects


@transaction.atomic
def do_set_session_workspace(effect: TurnEffect, directory: str) -> None:
    """set_workspace carried out: the session works in `directory` from now on."""
    session = Session.objects.select_for_update().get(pk=effect.turn.chat.session_id)
    check_working_directory(session.tenant, directory)
    old = list(session.working_directories)
    session.working_directories = [directory]
    touch(session, "working_directories")
    for gone in old:
        if gone != directory:
            publish(session.tenant_id, session.uri, {"type": "session/workingDirectoryRemoved", "directory": gone})
    publish(session.tenant_id, session.uri, {"type": "session/workingDirectorySet", "directory": directory})
    summary_changed(session, workingDirectories=[directory])
    TurnEffect.objects.filter(pk=effect.pk).delete()


@transaction.atomic
def do_set_chat_folder(effect: TurnEffect, directory: str) -> None:
    """isolate_session carried out: only the calling chat moves to `directory`, which the
    session's workspace now includes."""
    chat = effect.turn.chat
    session = Session.objects.select_for_update().get(pk=chat.session_id)
    check_working_directory(session.tenant, directory)
    ChatBackend.objects.update_or_create(chat=chat, defaults={"working_directory": directory})
    publish(session.tenant_id, chat.uri, {"type": "chat/workingDirectorySet", "directory": directory})
    if directory not in session.working_directories:
        session.working_directories = [*session.working_directories, directory]
        touch(session, "working_directories")
        publish(session.tenant_id, session.uri, {"type": "session/workingDirectorySet", "directory": directory})
        summary_changed(session, workingDirectories=list(session.working_directories))
    TurnEffect.objects.filter(pk=effect.pk).delete()


def drop_turn_effect(effect: TurnEffect) -> None:
    TurnEffect.objects.filter(pk=effect.pk).delete()
