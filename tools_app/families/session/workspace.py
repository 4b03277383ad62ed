"""set_workspace and isolate_session: asked for during a turn, carried out when it completes
(dropped when it is cancelled or fails), with real `git worktree` for isolation. A folder, and
the `<folder>.worktrees/` isolation cuts into, must lie in the tenant's workspace root: checked
when asked and again when carried out."""
import glob
import logging
import os
import subprocess
import uuid

from agents.registry import get_provider
from kernel.refusals import Refused
from sandbox.bubblewrap import Sandbox, SandboxUnavailable
from sandbox.workspaces import OutsideWorkspace, checked_worktree_home
from sessions_app import actions
from sessions_app.models import ChatBackend

from .links import require_write

logger = logging.getLogger(__name__)


class WorktreeFailed(Exception):
    pass


def folder_path(directory):
    return directory[len("file://"):] if directory.startswith("file://") else directory


def folder_uri(path):
    return path if "://" in path else f"file://{path}"


def included_files(folder, patterns):
    """What the session's `worktreeIncludeFiles` patterns name in `folder` (untracked files a new
    worktree lacks: a .env, local settings), as paths relative to it: regular files inside the
    folder reached through no symlink, never under .git."""
    root = os.path.realpath(folder)
    found = []
    for pattern in patterns or ():
        if not isinstance(pattern, str) or not pattern or os.path.isabs(pattern) or ".." in pattern.split("/"):
            logger.warning("Ignored worktreeIncludeFiles pattern %r: not a relative pattern inside the folder", pattern)
            continue
        for path in glob.glob(pattern, root_dir=root, recursive=True, include_hidden=True):
            full = os.path.join(root, path)
            if path.split("/")[0] == ".git" or not os.path.isfile(full) or os.path.realpath(full) != full:
                continue
            found.append(path)
    return sorted(set(found))


def cut_worktree(folder, label, session, include=()):
    """A new worktree of the repository at `folder`, on a new branch, beside it:
    `<folder>.worktrees/<label>`, with the files `include` patterns name copied in. Answers its
    path. `git` and the copy run in the session's sandbox, which holds only the repository and
    the folder of its worktrees."""
    folder = os.path.abspath(folder_path(folder))
    worktrees = f"{folder}.worktrees"
    target = os.path.join(worktrees, label)
    sandbox = Sandbox(str(session.id), tenant_id=session.tenant_id, writable=(folder, worktrees))
    files = included_files(folder, include)
    try:
        sandbox.make_folder(worktrees)
        done = sandbox.run(["git", "-C", folder, "worktree", "add", "-b", f"agent/{label}", target], timeout=60)
        if done.returncode == 0 and files:
            copied = sandbox.run(["cp", "-p", "--parents", "--", *files, target], cwd=folder, timeout=60)
            if copied.returncode != 0:
                logger.warning("Could not copy worktreeIncludeFiles into %s: %s", target, copied.stderr.strip())
    except (SandboxUnavailable, subprocess.TimeoutExpired, OSError) as exc:
        raise WorktreeFailed(str(exc)) from exc
    if done.returncode != 0:
        raise WorktreeFailed(done.stderr.strip() or f"git worktree add exited with {done.returncode}")
    return target


def checked_folders(tenant, folder, isolation):
    """The real path of `folder`, refused (with its sentence) unless it, and with `isolation`
    its worktrees' folder, lie in the tenant's workspace root."""
    real = actions.check_working_directory(tenant, folder)
    if isolation:
        try:
            checked_worktree_home(tenant, folder)
        except OutsideWorkspace as outside:
            raise Refused(outside.sentence, "invalid") from None
    return real


def chat_folder(chat):
    backend = ChatBackend.objects.filter(chat=chat).exclude(working_directory="").first()
    if backend:
        return backend.working_directory
    folders = chat.session.working_directories
    return folders[0] if folders else None


def _needs_turn(context, tool_name):
    if context.turn is None:
        raise Refused(f"{tool_name} acts when the calling turn ends; call it from a turn.", "conflict")


def set_workspace(context, arguments):
    require_write(context.principal, context.session)
    _needs_turn(context, "set_workspace")
    folder = folder_path(arguments["workspaceFolder"])
    if not os.path.isabs(folder):
        raise Refused("workspaceFolder must be an absolute folder path or file URI.", "invalid")
    checked_folders(context.principal.tenant, arguments["workspaceFolder"], bool(arguments["isolation"]))
    actions.do_add_turn_effect(context.principal, context.turn, "set_workspace",
                               {"folder": folder, "isolation": bool(arguments["isolation"])})
    how = "a new Git worktree of it" if arguments["isolation"] else "it"
    return f"When this turn ends, the session will work in {how} ({folder}). Make this the turn's final tool call."


def keeps_folder_per_chat(session):
    """Offered only where the session's provider keeps a folder per chat."""
    provider = get_provider(session.provider) if session is not None else None
    return bool(getattr(provider, "folder_per_chat", False))


def isolate_session(context, arguments):
    require_write(context.principal, context.session)
    _needs_turn(context, "isolate_session")
    folder = chat_folder(context.chat)
    if folder is None:
        raise Refused("isolate_session needs a chat working in a local Git folder; this one has none.",
                              "conflict")
    checked_folders(context.principal.tenant, folder, True)
    actions.do_add_turn_effect(context.principal, context.turn, "isolate_chat", {"folder": folder})
    return ("End this turn: when it completes, only this chat moves to a new Git worktree cut from "
            f"{folder_path(folder)}, and continues there.")


def carry_out(effect):
    tenant = effect.turn.chat.session.tenant
    isolation = effect.kind != "set_workspace" or effect.arguments.get("isolation")
    # Checked again: a symlink in the root may have changed since the turn asked.
    real = str(checked_folders(tenant, effect.arguments["folder"], isolation))
    label = f"{effect.turn.chat_id.hex[:8]}-{uuid.uuid4().hex[:6]}"
    session = effect.turn.chat.session
    include = (session.config or {}).get("worktreeIncludeFiles") or ()
    if effect.kind == "set_workspace":
        path = cut_worktree(real, label, session, include) if isolation else folder_path(effect.arguments["folder"])
        actions.do_set_session_workspace(effect, folder_uri(path))
    else:
        actions.do_set_chat_folder(effect, folder_uri(cut_worktree(real, label, session, include)))


def settle_turn_effects(turn_id):
    """Called once a turn has ended: carry out its effects when it completed, else drop them."""
    completed, effects = actions.pending_turn_effects(turn_id)
    for effect in effects:
        try:
            carry_out(effect)
        except (WorktreeFailed, Refused) as failed:
            logger.warning("Could not carry out %s for turn %s: %s", effect.kind, turn_id, failed)
            actions.drop_turn_effect(effect)
    return completed


def started_with_workspace(session):
    """set_workspace is deferred, except for a session that started with no folder: that one is
    offered it up front."""
    return bool(getattr(session, "working_directories", None))
