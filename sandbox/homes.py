"""A sandbox's home folder, on the host's workspace root rather than in a node's var/.

The harness CLIs keep their conversations in the home (Claude Code's transcripts under
`~/.claude`, the Copilot CLI's session state under `~/.copilot`); kept at
`<AHP_WORKSPACE_ROOT>/.homes/<sandbox key>`, on a host whose workspace root is a volume every node
mounts, a session re-homed on another node finds them there and its chats resume. Its user id is
recorded host-wide (`identity.sandbox_user`), so every node runs the sandbox as the home's owner.

`.homes` is the host's alone (root, 0700: no sandbox user passes it), and each home its sandbox
user's (0700). The host makes a home and hands it over the moment it made it; afterwards it opens
it beneath the host's root through no link, binds it by that descriptor, and empties it as the
home's owner: a link a member planted in it is only ever followed inside the sandbox, as its user,
where neither another session's home nor the host's files are mounted."""
import errno
import logging
import os
import uuid

from .beneath import as_identity, open_beneath, open_root, remove_contents, rename_no_replace
from .workspaces import HOMES, host_root

logger = logging.getLogger(__name__)


def _homes_folder(make: bool = True) -> int:
    """A descriptor of `.homes` in the host's root (made if missing and `make`); a link there is refused."""
    if make:
        host_root().mkdir(parents=True, exist_ok=True)
    root = open_root(str(host_root()))
    try:
        if make:
            try:
                os.mkdir(HOMES, 0o700, dir_fd=root)
            except FileExistsError:
                pass
        return open_beneath(root, HOMES, os.O_RDONLY | os.O_DIRECTORY)
    finally:
        os.close(root)


def home_folder(key: str, owner: tuple[int, int]) -> int:
    """A descriptor of the sandbox `key`'s home, owned by `owner` (uid, gid): made when missing,
    and made anew when another identity left it (an earlier sandbox of the key, ended unclean)."""
    homes = _homes_folder()
    try:
        for _ in range(3):
            try:
                home = open_beneath(homes, key, os.O_RDONLY | os.O_DIRECTORY)
            except FileNotFoundError:
                try:
                    return _made_home(homes, key, owner)
                except FileExistsError:
                    continue  # another launch of the sandbox made it meanwhile
            if os.geteuid() != 0 or os.fstat(home).st_uid == owner[0]:
                return home
            os.close(home)
            _remove(homes, key)
        raise OSError(errno.EAGAIN, f"the home of sandbox {key} could not be made for its user")
    finally:
        os.close(homes)


def _made_home(homes: int, key: str, owner: tuple[int, int]) -> int:
    """A new home, its owner's before it takes its name: no launch ever binds it the host's."""
    draft = f".{key}.{uuid.uuid4().hex}"
    os.mkdir(draft, 0o700, dir_fd=homes)
    home = open_beneath(homes, draft, os.O_RDONLY | os.O_DIRECTORY)
    try:
        if os.geteuid() == 0:
            os.fchown(home, *owner)  # just made by the host, in a folder no sandbox sees
        rename_no_replace(homes, draft, key)
    except BaseException:
        os.close(home)
        os.rmdir(draft, dir_fd=homes)
        raise
    return home


def tenant_harness_folder(name: str, tenant_id: int) -> str:
    """The path of a folder of the tenant's own beside the homes (`.homes/<name>-tenant-<id>`), made
    if missing: a harness's state that all the tenant's sessions share (an empty-mode Copilot
    CLI's). A launch binds it writable and hands it to the tenant's group (Sandbox.host_folder)."""
    folder = f"{name}-tenant-{tenant_id}"
    homes = _homes_folder()
    try:
        try:
            os.mkdir(folder, 0o700, dir_fd=homes)
        except FileExistsError:
            pass
    finally:
        os.close(homes)
    return str(host_root() / HOMES / folder)


def remove_home(key: str) -> None:
    """The sandbox `key`'s home and all in it removed: its contents as their owner, by
    descriptor (a link in it is removed, never followed), then the empty folder by the host."""
    try:
        homes = _homes_folder(make=False)
    except FileNotFoundError:
        return  # no sandbox of this host's root ever had a home
    try:
        _remove(homes, key)
    except FileNotFoundError:
        pass
    except OSError as error:
        logger.warning("The home of sandbox %s was not removed: %s", key, error.strerror)
    finally:
        os.close(homes)


def _remove(homes: int, key: str) -> None:
    home = open_beneath(homes, key, os.O_RDONLY | os.O_DIRECTORY)
    try:
        status = os.fstat(home)
        if os.geteuid() == 0 and status.st_uid == 0:
            raise OSError(errno.EPERM, f"the home of sandbox {key} belongs to no sandbox user")
        with as_identity(status.st_uid, status.st_gid):
            remove_contents(home)
    finally:
        os.close(home)
    os.rmdir(key, dir_fd=homes)
