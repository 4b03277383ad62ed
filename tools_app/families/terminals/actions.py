"""Terminals: opened in a session's sandbox, fed input, resized, claimed, exited, disposed. The
row is the truth; the PTY behind it lives in the process that opened it (`pty.py`)."""
import os
from pathlib import Path

from django.conf import settings
from django.db import transaction

from kernel.ids import parse_uuid
from kernel.refusals import Refused
from kernel.rows import ITS_ROW
from sandbox.workspaces import OutsideWorkspace, checked_folder, folder_path, is_folder, is_within
from sessions_app import events
from sessions_app.actions import require

from .models import MAX_KEPT_OUTPUT, TERMINAL_URI_PREFIX, Terminal

MAX_SIDE = 1000  # columns or rows


def terminal_at(uri, tenant):
    key = parse_uuid(uri[len(TERMINAL_URI_PREFIX):]) if isinstance(uri, str) and uri.startswith(TERMINAL_URI_PREFIX) \
        else None
    return key and Terminal.objects.for_tenant(tenant).select_related("session").filter(id=key).first()


def terminal_folder(session, cwd):
    """The real path a terminal opens in: `cwd` (default the session's first working directory),
    which must lie in one of the session's working directories."""
    folders = []
    for directory in session.working_directories:
        try:
            folders.append(checked_folder(session.tenant, directory))
        except OutsideWorkspace:
            continue
    if not folders:
        raise Refused("The session has no working directory for a terminal to open in.", "conflict")
    if cwd is None:
        return folders[0]
    path = folder_path(cwd) if isinstance(cwd, str) else None
    normal = Path(os.path.normpath(path)) if path else None
    if normal is None or not any(is_within(normal, folder) for folder in folders) or not is_folder(normal):
        raise Refused(f"{cwd} is not a folder in the session's working directories.", "invalid")
    return normal


def checked_size(cols, rows):
    for name, value in (("cols", cols), ("rows", rows)):
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_SIDE:
            raise Refused(f"{name} must be a whole number from 1 to {MAX_SIDE}.", "invalid")


def checked_claim(claim, terminal_session, client_id):
    """A client may give a terminal to itself or to the terminal's session, no one else."""
    if claim == {"kind": "client", "clientId": client_id}:
        return claim
    if isinstance(claim, dict) and claim.get("kind") == "session" and claim.get("session") == terminal_session.uri:
        return {k: claim[k] for k in ("kind", "session", "turnId", "toolCallId") if isinstance(claim.get(k), str)}
    raise Refused(f"A terminal's claim is this client ({client_id}) or its session ({terminal_session.uri}).", "invalid")


@transaction.atomic
def do_create_terminal(principal, terminal_id, session, client_id, cwd=None, title="", cols=80, rows=24, claim=None):
    require(principal, "terminal:write", session)
    if Terminal.objects.filter(id=terminal_id).exists():
        raise Refused(f"Terminal {TERMINAL_URI_PREFIX}{terminal_id} already exists.", "exists")
    checked_size(cols, rows)
    if Terminal.objects.filter(session=session, exit_code__isnull=True).count() >= settings.AHP_MAX_TERMINALS_PER_SESSION:
        # Each holds a pseudo-terminal of the host's and two root processes of bubblewrap.
        raise Refused(f"This session has {settings.AHP_MAX_TERMINALS_PER_SESSION} open terminals, the most it may; "
                      "dispose of one first.", "conflict")
    folder = terminal_folder(session, cwd)
    claim = checked_claim(claim or {"kind": "client", "clientId": client_id}, session, client_id)
    return Terminal.objects.create(id=terminal_id, session=session, creator=principal.person, title=title or "sh",
                                   cwd=folder.as_uri(), cols=cols, rows=rows, claim=claim, process=events.PROCESS)


def running_here(terminal):
    if terminal.exit_code is not None:
        raise Refused(f"Terminal {terminal.uri} has exited.", "conflict")
    if terminal.process != events.PROCESS:
        raise Refused(f"Terminal {terminal.uri} runs in another host process; reach it through that process.",
                      "conflict")


@transaction.atomic
def do_terminal_input(principal, terminal, data, origin=None):
    """terminal/input: what a person types; the caller writes it to the PTY once applied."""
    require(principal, "terminal:write", terminal.session)
    if not isinstance(data, str):
        raise Refused("terminal/input needs data that is a string.", "invalid")
    running_here(terminal)
    events.publish(terminal.session.tenant_id, terminal.uri, {"type": "terminal/input", "data": data}, origin)
    return terminal, data


@transaction.atomic
def do_resize_terminal(principal, terminal, cols, rows, origin=None):
    require(principal, "terminal:write", terminal.session)
    checked_size(cols, rows)
    running_here(terminal)
    Terminal.objects.filter(pk=terminal.pk).update(cols=cols, rows=rows)
    events.publish(terminal.session.tenant_id, terminal.uri, {"type": "terminal/resized", "cols": cols, "rows": rows},
                   origin)
    return terminal, (cols, rows)


@transaction.atomic
def do_claim_terminal(principal, terminal, client_id, claim, origin=None):
    require(principal, "terminal:write", terminal.session)
    claim = checked_claim(claim, terminal.session, client_id)
    Terminal.objects.filter(pk=terminal.pk).update(claim=claim)
    events.publish(terminal.session.tenant_id, terminal.uri, {"type": "terminal/claimed", "claim": claim}, origin)


@transaction.atomic
def do_terminal_output(terminal_id, text):
    """The shell wrote `text`: kept (bounded) for fresh snapshots, and sent as terminal/data."""
    terminal = Terminal.objects.select_for_update(of=ITS_ROW).select_related("session").filter(id=terminal_id).first()
    if terminal is None:
        return
    terminal.output = (terminal.output + text)[-MAX_KEPT_OUTPUT:]
    terminal.save(update_fields=["output"])
    events.publish(terminal.session.tenant_id, terminal.uri, {"type": "terminal/data", "data": text})


@transaction.atomic
def do_terminal_exited(terminal_id, exit_code):
    terminal = Terminal.objects.select_for_update(of=ITS_ROW).select_related("session").filter(id=terminal_id).first()
    if terminal is None or terminal.exit_code is not None:
        return
    terminal.exit_code = exit_code
    terminal.save(update_fields=["exit_code"])
    events.publish(terminal.session.tenant_id, terminal.uri, {"type": "terminal/exited", "exitCode": exit_code})


@transaction.atomic
def do_dispose_terminal(principal, terminal):
    """disposeTerminal: the row goes; the caller ends its shell."""
    require(principal, "terminal:write", terminal.session)
    Terminal.objects.filter(pk=terminal.pk).delete()


# What a terminal whose PTY died with its process exits with (no shell told its real code).
LOST_WITH_ITS_PROCESS = -1


def do_end_orphaned_terminals(cutoff):
    """Terminals whose holding process stopped renewing its lease before `cutoff` (it died, and
    their PTYs with it) exit, so their subscribers stop waiting on a shell that is gone."""
    from sessions_app.actions.presence import live_processes

    orphans = list(Terminal.objects.filter(exit_code__isnull=True, created__lt=cutoff)
                   .exclude(process__in=list(live_processes(cutoff))).values_list("id", flat=True))
    for terminal_id in orphans:
        do_terminal_exited(terminal_id, LOST_WITH_ITS_PROCESS)
    return len(orphans)
