"""Where a tenant's working directories may be: inside its workspace root, a folder under the
host-wide root (`AHP_WORKSPACE_ROOT`, default `<var dir>/workspaces`), `<host root>/<slug>`
unless an operator set the tenant's own. A folder is judged by its normalised path (every `..`
resolved by spelling) and must be reached through no link, so no spelling of it reaches outside."""
import errno
import os
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

from django.conf import settings

from . import identity
from .beneath import open_beneath, open_root

if TYPE_CHECKING:
    from grants.models import Tenant


class OutsideWorkspace(ValueError):
    def __init__(self, sentence: str) -> None:
        super().__init__(sentence)
        self.sentence = sentence


def outside_sentence(shown: str) -> str:
    return f"{shown} is outside this tenant's workspace root."


HOMES = ".homes"  # the sandboxes' homes, in the host's root beside the tenants' (homes.py)
MISPLACED_ROOT = "This tenant's workspace root is not inside the host's workspace root; an operator must set it."


def host_root() -> Path:
    return Path(os.path.realpath(settings.AHP_WORKSPACE_ROOT))


def root_problem(configured: str) -> str | None:
    """Why `configured` cannot be a tenant's workspace root, or None."""
    root = Path(os.path.realpath(configured)) if os.path.isabs(configured) else None
    if root is not None and is_within(root, host_root() / HOMES):
        return f"A tenant's workspace root cannot be in {host_root() / HOMES}, where the host keeps its sandboxes' homes."
    if root is None or root == host_root() or not is_within(root, host_root()):
        return f"A tenant's workspace root is an absolute folder inside the host's workspace root ({host_root()})."
    return None


def tenant_root(tenant: "Tenant") -> Path:
    """The tenant's root, real path; refused when an operator set it outside the host root."""
    configured = getattr(tenant, "workspace_root", "") or os.path.join(settings.AHP_WORKSPACE_ROOT, tenant.slug)
    if root_problem(configured):
        raise OutsideWorkspace(MISPLACED_ROOT)
    return Path(os.path.realpath(configured))


def relative_to_host_root(path: str | Path) -> str:
    """`path` (absolute, no `..`) relative to the host's workspace root, spelled by its real path
    or as the operator configured it; a path outside answers one that leads out, which opening
    beneath the root refuses."""
    path = os.path.normpath(path)
    for root in (str(host_root()), os.path.normpath(settings.AHP_WORKSPACE_ROOT)):
        if is_within(Path(path), Path(root)):
            return os.path.relpath(path, root)
    return os.path.relpath(path, host_root())


PREPARED: set[tuple[int, Path]] = set()  # (tenant id, root) of the roots this process has prepared


def prepared_root(tenant: "Tenant") -> Path:
    """The tenant's root (real path), made if missing, where its sessions may work: the host's
    root lets every sandbox user pass (not list), the tenant's belongs to its group (setgid, so
    what any of its sessions makes there stays the group's) and is closed to everyone else.
    Prepared once per process: every file command and folder check asks for it."""
    root = tenant_root(tenant)
    if (tenant.id, root) in PREPARED:
        return root
    if os.geteuid() != 0:
        root.mkdir(parents=True, exist_ok=True)
        return root
    host = host_root()
    host.mkdir(parents=True, exist_ok=True)
    if host.stat().st_mode & 0o011 != 0o011:
        host.chmod(host.stat().st_mode | 0o011)
    try:
        root.mkdir(mode=0o2770, parents=True)
    except FileExistsError:
        pass
    fd = open_root(str(root))  # made by the host or the operator; a link there is refused
    try:
        gid, status = identity.tenant_group(tenant.id), os.fstat(fd)
        if status.st_gid != gid:
            os.fchown(fd, -1, gid)
        if status.st_mode & 0o7777 != 0o2770:
            os.fchmod(fd, 0o2770)
    finally:
        os.close(fd)
    PREPARED.add((tenant.id, root))
    return root


def is_within(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def folder_path(directory: str) -> str | None:
    """The local path a working directory names: a `file:` URI (percent-decoded) or an absolute
    path; None for anything else (another scheme, a relative path)."""
    if "://" in directory or directory.startswith("file:"):
        parts = urlsplit(directory)
        if parts.scheme != "file" or parts.netloc not in ("", "localhost") or parts.query or parts.fragment:
            return None
        directory = unquote(parts.path)
    return directory if os.path.isabs(directory) else None


def checked_folder(tenant: "Tenant", directory: str) -> Path:
    """`directory` as a normalised path in the tenant's workspace root, reached through no link
    as far as it exists; raises OutsideWorkspace with the sentence otherwise. Whoever then uses
    the folder opens it beneath the root through no link again (beneath.py): a link made after
    this check is refused at the use, never followed."""
    path = folder_path(directory)
    shown = path or directory
    if path is None or "\x00" in path or "\x00" in directory:
        raise OutsideWorkspace(outside_sentence(shown))
    root = prepared_root(tenant)
    configured = Path(os.path.normpath(getattr(tenant, "workspace_root", "") or
                                       os.path.join(settings.AHP_WORKSPACE_ROOT, tenant.slug)))
    # A reader that strips `file://` without percent-decoding must land inside as well.
    undecoded = directory.removeprefix("file://")
    spellings = [path, undecoded] if os.path.isabs(undecoded) else [path]
    found = [in_root(Path(os.path.normpath(spelling)), root, configured) for spelling in spellings]
    if found[0] is None or None in found or link_on_the_way(found[0]):
        raise OutsideWorkspace(outside_sentence(shown))
    return found[0]


def in_root(path: Path, root: Path, configured: Path) -> Path | None:
    """`path` spelled under the root's real path, or None when it lies in neither spelling of it."""
    for base in (root, configured):
        if is_within(path, base):
            return root / path.relative_to(base)
    return None


def is_folder(path: str | Path) -> bool:
    """Whether `path` (a tenant's) is a folder reached through no link."""
    root = open_root(str(host_root()))
    try:
        os.close(open_beneath(root, relative_to_host_root(str(path)), os.O_PATH | os.O_DIRECTORY))
        return True
    except OSError:
        return False
    finally:
        os.close(root)


def link_on_the_way(path: Path) -> bool:
    """Whether the part of `path` that exists is reached through a link (or leads out)."""
    try:
        root = open_root(str(host_root()))
    except FileNotFoundError:
        return False
    try:
        os.close(open_beneath(root, relative_to_host_root(str(path)), os.O_PATH))
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError as error:
        return error.errno in (errno.ELOOP, errno.EXDEV)
    finally:
        os.close(root)
    return False


def checked_worktree_home(tenant: "Tenant", directory: str) -> Path:
    """`<folder>.worktrees`, where isolation cuts worktrees of `directory`: it must end inside
    the root too (a worktree of the root itself would land beside it)."""
    folder = checked_folder(tenant, directory)
    return checked_folder(tenant, f"{folder}.worktrees")
