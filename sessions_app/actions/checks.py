"""What the writers of every noun check and share: grants, quotas, message and title bounds,
working directories, and touching a session so its summary follows."""
from pathlib import Path
from typing import Any

from django.utils import timezone

from grants.models import Principal, Tenant
from kernel.refusals import Refused
from kernel.rows import update
from sandbox.workspaces import OutsideWorkspace, checked_folder

from ..channels import ROOT
from ..events.delivery import notify
from ..models import Session, iso
from ..quotas import quota_problem

MAX_TITLE_CHARS = 200
MAX_MESSAGE_CHARS = 128 * 1024  # a prompt or message a turn starts with, whoever sends it
MOVES_OFF = "Moving chats and sessions is turned off (chatMoves.enabled is false)."


def client_taken(client_id: str) -> str:
    return f"Client id {client_id} belongs to another person in this session."


def check_message_text(text: object) -> None:
    """Every door that starts a turn (turnStarted, createChat, send_message, wakeups) refuses so."""
    if not isinstance(text, str) or len(text) > MAX_MESSAGE_CHARS:
        raise Refused(f"A message is a string of at most {MAX_MESSAGE_CHARS} characters.", "invalid")


def check_title(title: object) -> str:
    if not isinstance(title, str) or len(title) > MAX_TITLE_CHARS:
        raise Refused(f"A title is a string of at most {MAX_TITLE_CHARS} characters.", "invalid")
    return title


def check_working_directory(tenant: Tenant, directory: str) -> Path:
    """The real path of `directory`, refused unless it lies in the tenant's workspace root."""
    try:
        return checked_folder(tenant, directory)
    except OutsideWorkspace as outside:
        raise Refused(outside.sentence, "invalid") from None


def require(principal: Principal, grant: str, session: Session | None = None) -> None:
    if not principal.may(grant, session):
        raise Refused(f"{principal.name} may not {grant} here")


def check_quota(principal: Principal, kind: str) -> None:
    problem = quota_problem(principal, kind)
    if problem:
        raise Refused(problem, "conflict")


def touch(session: Session, *fields: str) -> None:
    """The session's `fields` written, and its `modified` moved, in one hand-written UPDATE (every
    turn's start and end touches its session)."""
    session.modified = timezone.now()
    update(session, "modified", *fields)


def summary_changed(session: Session, **changes: Any) -> None:
    notify(session.tenant_id, "root/sessionSummaryChanged", {
        "channel": ROOT, "session": session.uri, "changes": {**changes, "modifiedAt": iso(session.modified)},
    })
