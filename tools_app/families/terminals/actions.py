"""Terminals: opened in a session's sandbox, fed input, resized, claimed, exited, disposed. The
row is the truth; the PTY behind it lives in the process that opened it (`pty.py`)."""
import os
import uuid
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from grants.algebra import holds
from kernel.after_commit import after_commit
from kernel.ids import parse_uuid
from kernel.refusals import Refused
from kernel.rows import ITS_ROW
from sandbox.beneath import open_beneath, open_root
from sandbox.bubblewrap import Sandbox
from sandbox.workspaces import (
    OutsideWorkspace,
    checked_folder,
    folder_path,
    host_root,
    is_folder,
    is_within,
    prepared_root,
    relative_to_host_root,
)
from sessions_app import events
from sessions_app.actions import require
from sessions_app.actions.homes import LEASE_SECONDS, alive, ended_elsewhere
from sessions_app.channels import ROOT

from .models import MAX_KEPT_OUTPUT, TERMINAL_URI_PREFIX, Terminal

MAX_SIDE = 1000  # columns or rows
MAX_TITLE = 200  # characters, as the row keeps
# The root state's catalogue (`terminals`, root/terminalsChanged) lists the tenant's newest this
# many, so it always fits in one message.
MAX_LISTED_TERMINALS = 1000
# Under the tenant's root, the folders of sessions that have no working directory of their own.
SESSIONS_FOLDER = ".sessions"


def terminal_at(uri: Any, tenant: Any) -> Terminal | None:
    """The tenant's terminal at `uri`, as it is now: one whose process died exits as it is asked
    for, not at the next sweep (do_end_orphaned_terminals), so no one is told it runs."""
    key = parse_uuid(uri[len(TERMINAL_URI_PREFIX):]) if isinstance(uri, str) and uri.startswith(TERMINAL_URI_PREFIX) \
        else None
    rows = Terminal.objects.for_tenant(tenant).select_related("session").filter(id=key)
    terminal = rows.first() if key else None
    if (terminal is not None and terminal.exit_code is None and terminal.process != events.PROCESS
            and not alive(terminal.process)):
        do_terminal_exited(terminal.id, LOST_WITH_ITS_PROCESS)
        terminal = rows.first()
    return terminal


def session_folders(session):
    """The folders a terminal of `session` may open in: its working directories, or, for a session
    without any, a folder of its own in the tenant's root (`own_folder`)."""
    folders = []
    for directory in session.working_directories:
        try:
            folders.append(checked_folder(session.tenant, directory))
        except OutsideWorkspace:
            continue
    return folders or [own_folder(session)]


def own_folder(session):
    """`<tenant root>/.sessions/<session id>`: made by the host beneath the root through no link,
    as the session's sandbox user (`.sessions` first, then shared with the tenant's group so each
    of its sessions can make its own there); its sandbox then binds it like a working directory."""
    root = prepared_root(session.tenant)
    parent, folder = root / SESSIONS_FOLDER, root / SESSIONS_FOLDER / str(session.id)
    sandbox = Sandbox(str(session.id), tenant_id=session.tenant_id)
    try:
        sandbox.make_folder(str(parent))
        share_with_tenant(sandbox, parent)
        sandbox.make_folder(str(folder))
    except OSError as error:
        raise Refused(f"The session's own folder {folder.as_uri()} could not be made: {error.strerror}.",
                      "conflict") from None
    if not is_folder(folder):
        raise Refused(f"The session's own folder {folder.as_uri()} could not be made: it is not a folder.",
                      "conflict")
    return folder


def share_with_tenant(sandbox, path):
    """`path`, opened beneath the host's root through no link, made its tenant's group's."""
    root = open_root(str(host_root()))
    try:
        fd = open_beneath(root, relative_to_host_root(str(path)), os.O_RDONLY | os.O_DIRECTORY)
    finally:
        os.close(root)
    try:
        sandbox.share_with_tenant(fd)
    finally:
        os.close(fd)


def terminal_folder(session, cwd):
    """The real path a terminal opens in: `cwd` (default the session's first folder), which must
    lie in one of the session's folders (`session_folders`)."""
    folders = session_folders(session)
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


# The root state's terminal catalogue -----------------------------------------------------------

def terminal_info(terminal):
    """The AHP TerminalInfo: what the root state lists of a terminal."""
    info = {"resource": terminal.uri, "title": terminal.title, "claim": terminal.claim}
    if terminal.exit_code is not None:
        info["exitCode"] = terminal.exit_code
    return info


def listed_terminals(tenant_id):
    """The tenant's terminals the catalogue lists, oldest first: its newest MAX_LISTED_TERMINALS."""
    rows = Terminal.objects.filter(session__tenant_id=tenant_id).select_related("session")
    return list(rows.order_by("-created", "-id")[:MAX_LISTED_TERMINALS])[::-1]


def readable(principal, terminals):
    """Those of `terminals` whose session `principal` may terminal:read."""
    if holds(principal.grants, "terminal:read"):
        return list(terminals)
    may = {}
    for terminal in terminals:
        if terminal.session_id not in may:
            may[terminal.session_id] = principal.may("terminal:read", terminal.session)
    return [t for t in terminals if may[t.session_id]]


def root_terminals(principal, tenant):
    """RootState.terminals as `principal` sees it: the tenant's terminals it may read."""
    return [terminal_info(t) for t in readable(principal, listed_terminals(tenant.pk))]


def terminals_changed(tenant_id):
    """Publish root/terminalsChanged, the tenant's whole catalogue (each subscriber is sent the
    part it may read: `terminals_seen`). Read under the tenant's counter lock, so the catalogue
    a later action carries includes every change numbered before it."""
    events.snapshot_lock(tenant_id)
    events.publish(tenant_id, ROOT, {"type": "root/terminalsChanged",
                                     "terminals": [terminal_info(t) for t in listed_terminals(tenant_id)]})


def is_terminals_changed(envelope):
    return envelope.get("channel") == ROOT and (envelope.get("action") or {}).get("type") == "root/terminalsChanged"


def terminals_seen(principal, envelope):
    """`envelope` as `principal` may see it: a root/terminalsChanged keeps only the terminals whose
    session it may terminal:read (one gone since is left out); any other envelope is unchanged."""
    if not is_terminals_changed(envelope) or holds(principal.grants, "terminal:read"):
        return envelope
    listed = envelope["action"].get("terminals") or []
    keys = [key for info in listed if (key := parse_uuid(str(info.get("resource", ""))[len(TERMINAL_URI_PREFIX):]))]
    rows = Terminal.objects.for_tenant(principal.tenant).select_related("session").filter(id__in=keys)
    kept = {t.uri for t in readable(principal, rows)}
    return {**envelope, "action": {**envelope["action"], "terminals": [i for i in listed if i.get("resource") in kept]}}


@transaction.atomic
def do_create_terminal(principal, terminal_id, session, client_id, cwd=None, title="", cols=80, rows=24, claim=None):
    require(principal, "terminal:write", session)
    if Terminal.objects.filter(id=terminal_id).exists():
        raise Refused(f"Terminal {TERMINAL_URI_PREFIX}{terminal_id} already exists.", "exists")
    checked_size(cols, rows)
    if not isinstance(title, str) or len(title) > MAX_TITLE:
        raise Refused(f"A terminal's name is a string of at most {MAX_TITLE} characters.", "invalid")
    if Terminal.objects.filter(session=session, exit_code__isnull=True).count() >= settings.AHP_MAX_TERMINALS_PER_SESSION:
        # Each holds a pseudo-terminal of the host's and two root processes of bubblewrap.
        raise Refused(f"This session has {settings.AHP_MAX_TERMINALS_PER_SESSION} open terminals, the most it may; "
                      "dispose of one first.", "conflict")
    claim = checked_claim(claim or {"kind": "client", "clientId": client_id}, session, client_id)
    folder = terminal_folder(session, cwd)
    terminal = Terminal.objects.create(id=terminal_id, session=session, creator=principal.person, title=title or "sh",
                                       cwd=folder.as_uri(), cols=cols, rows=rows, claim=claim, process=events.PROCESS)
    terminals_changed(session.tenant_id)
    return terminal


def running_here(terminal: Terminal) -> None:
    if terminal.exit_code is not None:
        raise Refused(f"Terminal {terminal.uri} has exited.", "conflict")
    if terminal.process != events.PROCESS:
        # Its session's requests come here (ahp.protocol.homes): the process that held it is gone.
        raise Refused(f"Terminal {terminal.uri} ended with the host process that ran it.", "conflict")


@transaction.atomic
def do_terminal_input(principal, terminal, data, *, origin=None):
    """terminal/input: what a person types; the caller writes it to the PTY once applied."""
    require(principal, "terminal:write", terminal.session)
    if not isinstance(data, str):
        raise Refused("terminal/input needs data that is a string.", "invalid")
    running_here(terminal)
    events.publish(terminal.session.tenant_id, terminal.uri, {"type": "terminal/input", "data": data}, origin)
    return terminal, data


@transaction.atomic
def do_resize_terminal(principal, terminal, cols, rows, *, origin=None):
    require(principal, "terminal:write", terminal.session)
    checked_size(cols, rows)
    running_here(terminal)
    Terminal.objects.filter(pk=terminal.pk).update(cols=cols, rows=rows)
    events.publish(terminal.session.tenant_id, terminal.uri, {"type": "terminal/resized", "cols": cols, "rows": rows},
                   origin)
    return terminal, (cols, rows)


@transaction.atomic
def do_claim_terminal(principal, terminal, client_id, claim, *, origin=None):
    require(principal, "terminal:write", terminal.session)
    claim = checked_claim(claim, terminal.session, client_id)
    Terminal.objects.filter(pk=terminal.pk).update(claim=claim)
    events.publish(terminal.session.tenant_id, terminal.uri, {"type": "terminal/claimed", "claim": claim}, origin)
    terminals_changed(terminal.session.tenant_id)


@transaction.atomic
def do_set_terminal_title(principal, terminal, title, *, origin=None):
    """terminal/titleChanged from a client: the terminal is renamed."""
    require(principal, "terminal:write", terminal.session)
    if not isinstance(title, str) or len(title) > MAX_TITLE:
        raise Refused(f"terminal/titleChanged needs a title that is a string of at most {MAX_TITLE} characters.",
                      "invalid")
    Terminal.objects.filter(pk=terminal.pk).update(title=title)
    events.publish(terminal.session.tenant_id, terminal.uri, {"type": "terminal/titleChanged", "title": title},
                   origin)
    terminals_changed(terminal.session.tenant_id)


@transaction.atomic
def do_clear_terminal(principal, terminal, *, origin=None):
    """terminal/cleared from a client: the kept output goes (a fresh snapshot's content is empty);
    the shell runs on."""
    require(principal, "terminal:write", terminal.session)
    Terminal.objects.filter(pk=terminal.pk).update(output="")
    events.publish(terminal.session.tenant_id, terminal.uri, {"type": "terminal/cleared"}, origin)


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
    terminals_changed(terminal.session.tenant_id)


@transaction.atomic
def do_dispose_terminal(principal: Any, terminal: Terminal) -> None:
    """disposeTerminal: the row goes, then its shell ends in the process that runs it."""
    require(principal, "terminal:write", terminal.session)
    Terminal.objects.filter(pk=terminal.pk).delete()
    terminals_changed(terminal.session.tenant_id)
    after_commit(f"ending the shell of {terminal.uri}", lambda: end_shell(terminal.id, terminal.process))


def end_shell(terminal_id: uuid.UUID, process: str) -> None:
    """After commit: the shell of a terminal gone ends in the process that runs it."""
    if not ended_elsewhere(process, {"session": None, "terminals": [str(terminal_id)]}):
        from .pty import end_shells  # it runs this module's writers

        end_shells([terminal_id])


def end_orphans_of(tenant_id: int) -> int:
    """As the tenant's terminals are listed, those whose process died exit (it renewed its lease
    no more for LEASE_SECONDS), not at the next sweep."""
    return do_end_orphaned_terminals(timezone.now() - timedelta(seconds=LEASE_SECONDS), tenant_id)


# What a terminal whose PTY died with its process exits with (no shell told its real code).
LOST_WITH_ITS_PROCESS = -1


def do_end_orphaned_terminals(cutoff: datetime, tenant_id: int | None = None) -> int:
    """Terminals (of `tenant_id`, or every tenant's) whose holding process stopped renewing its
    lease before `cutoff` (it died, and their PTYs with it) exit, so their subscribers stop
    waiting on a shell that is gone. How many did."""
    from sessions_app.actions.presence import live_processes

    rows = Terminal.objects.filter(exit_code__isnull=True, created__lt=cutoff)
    if tenant_id is not None:
        rows = rows.filter(session__tenant_id=tenant_id)
    orphans = list(rows.exclude(process__in=live_processes(cutoff)).values_list("id", flat=True))
    for terminal_id in orphans:
        do_terminal_exited(terminal_id, LOST_WITH_ITS_PROCESS)
    return len(orphans)
