"""Where a tenant's working directories may be: inside its workspace root, a folder under the
host-wide root (`AHP_WORKSPACE_ROOT`, default `<var dir>/workspaces`), `<host root>/<slug>`
unless an operator set the tenant's own. A folder is judged by its real path (every `..` and
symlink resolved), so no spelling of it reaches outside."""
import os
from pathlib import Path
from urllib.parse import unquote, urlsplit

from django.conf import settings


class OutsideWorkspace(ValueError):
    def __init__(self, sentence):
        super().__init__(sentence)
        self.sentence = sentence


def outside_sentence(shown):
    return f"{shown} is outside this tenant's workspace root."


MISPLACED_ROOT = "This tenant's workspace root is not inside the host's workspace root; an operator must set it."


def host_root():
    return Path(os.path.realpath(settings.AHP_WORKSPACE_ROOT))


def root_problem(configured):
    """Why `configured` cannot be a tenant's workspace root, or None."""
    root = Path(os.path.realpath(configured)) if os.path.isabs(configured) else None
    if root is None or root == host_root() or not is_within(root, host_root()):
        return f"A tenant's workspace root is an absolute folder inside the host's workspace root ({host_root()})."
    return None


def tenant_root(tenant):
    """The tenant's root, real path; refused when an operator set it outside the host root."""
    configured = getattr(tenant, "workspace_root", "") or os.path.join(settings.AHP_WORKSPACE_ROOT, tenant.slug)
    if root_problem(configured):
        raise OutsideWorkspace(MISPLACED_ROOT)
    return Path(os.path.realpath(configured))


def is_within(path, root):
    return path == root or root in path.parents


def folder_path(directory):
    """The local path a working directory names: a `file:` URI (percent-decoded) or an absolute
    path; None for anything else (another scheme, a relative path)."""
    if "://" in directory or directory.startswith("file:"):
        parts = urlsplit(directory)
        if parts.scheme != "file" or parts.netloc not in ("", "localhost") or parts.query or parts.fragment:
            return None
        directory = unquote(parts.path)
    return directory if os.path.isabs(directory) else None


def checked_folder(tenant, directory):
    """The real path of `directory` when it lies in the tenant's workspace root; raises
    OutsideWorkspace with the sentence otherwise. Call it again right before using a folder:
    a symlink inside the root can change between the check and the use."""
    path = folder_path(directory)
    shown = path or directory
    if path is None or "\x00" in path or "\x00" in directory:
        raise OutsideWorkspace(outside_sentence(shown))
    root = tenant_root(tenant)
    # A reader that strips `file://` without percent-decoding must land inside as well.
    undecoded = directory.removeprefix("file://")
    for spelling in {path, undecoded} if os.path.isabs(undecoded) else {path}:
        if not is_within(Path(os.path.realpath(spelling)), root):
            raise OutsideWorkspace(outside_sentence(shown))
    return Path(os.path.realpath(path))


def checked_worktree_home(tenant, directory):
    """`<folder>.worktrees`, where isolation cuts worktrees of `directory`: it must end inside
    the root too (a worktree of the root itself would land beside it)."""
    folder = checked_folder(tenant, directory)
    return checked_folder(tenant, f"{folder}.worktrees")
