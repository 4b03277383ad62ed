"""One sandbox per session: how the host runs anything a tenant's session asks it to run.

Every command (a stdio MCP server, an ACP agent, `git` on a tenant's folder) starts under
bubblewrap with:
- its own mount namespace holding read-only system paths, the session's working directories
  (writable), a home folder of the session's own (on the host's workspace root, so every node
  finds it: `homes.py`) and nothing else of the host (no var dir, no
  database file, no project tree, no other session's folders);
- its own network namespace: only loopback, where the bridge (`bridge.py`) carries connections
  to the host's forwarding proxy, which reaches only the destinations the sandbox was opened
  with (`proxy.py`);
- its own PID, IPC and UTS namespaces, a cleared environment (no DATABASE_URL, SECRET_KEY,
  REDIS_URL or tokens: only what the command's own entry sets), and resource limits;
- its own identity: when the host runs as root, bubblewrap builds the namespaces as root and
  `setpriv` drops to the sandbox's own user id, in its tenant's group (`identity.py`), before
  anything of the tenant's runs, so the process is that user outside the sandbox too. A host
  run as another user runs bubblewrap in a user namespace instead, and the command keeps that
  user's id.
- the tenant's folders, each opened by the host beneath the tenant's root without following a
  link (`beneath.py`) the moment the sandbox starts, and bound by that descriptor: a folder the
  tenant turned into a link is left out, whatever it was when the session was made. The host
  never changes the owner of anything in them.
It ends with the process that started it, and with its session: ending the sandbox kills every
process of its user id (which nothing else runs as) and removes the `alive` marker the bridge
watches. Its environment (model keys, an MCP server's secrets) is
never on a command line, which every local user can read in /proc: bubblewrap reads it from a
file only the host can read, removed as the sandbox starts (`--args`).
"""
import errno
import logging
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from django.conf import settings

from . import cgroups, identity, seccomp
from .beneath import as_identity, open_beneath, open_root, remove_tree
from .homes import home_folder, remove_home
from .mounts import Mounts
from .outbound import check_destination
from .proxy import PROXIES, Destinations, Launch, StandIn
from .workspaces import folder_path, host_root, relative_to_host_root

if TYPE_CHECKING:
    from sessions_app.models import Session

logger = logging.getLogger(__name__)

NO_BUBBLEWRAP = ("This host cannot run commands for a tenant: bubblewrap (bwrap) is not installed, "
                 "and nothing a tenant's session asks for runs outside a sandbox.")
PROXY_PORT = 3128
CONTROL = "/.sandbox"  # the control folder, seen from inside
PRIVATE = "/.private"  # one launch's own files (a CLI's MCP servers), seen from inside that launch alone
HOME = "/home/sandbox"
SYSTEM_PATHS = (
    "/usr", "/etc/alternatives", "/etc/ssl/certs", "/etc/ca-certificates", "/etc/ld.so.cache",
    "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime", "/etc/nsswitch.conf", "/etc/mime.types",
)
MERGED_USR = ("/bin", "/sbin", "/lib", "/lib64")
BRIDGE = Path(__file__).with_name("bridge.py")
# A tenant's repositories are made by its sessions' several users: git inside a sandbox, which
# holds nothing but the tenant's, works in them all.
GIT_SHARED = {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "safe.directory", "GIT_CONFIG_VALUE_0": "*"}
# A folder's descriptor is held this long after a launch binds it (bubblewrap mounts it at once).
HELD_SECONDS = 60
HELD: dict[str, list[tuple[float, int]]] = {}  # sandbox key -> [(when opened, descriptor)], in this process
GROUP_SHARED = 0o2070  # a tenant folder's group may enter and write it; what is made in it stays the group's
PROXY_SOCKET = "/.proxy.sock"  # this launch's own proxy socket, seen from inside
# fd 3: the environment file ($0), removed as bubblewrap reads it; fd 4: the launch's proxy
# lifeline ($1), held by bubblewrap and everything in the sandbox until it ends; $2: the sandbox's
# control group's `cgroup.procs` ("-": none), which the launch joins before bubblewrap runs; fd 5:
# the system-call filter ($3, seccomp.py) bubblewrap loads.
LAUNCH = ('exec 3< "$0" 4<> "$1" 5< "$3" && /bin/rm -f -- "$0" && { [ "$2" = - ] || echo $$ > "$2"; } '
          '&& shift 3 && exec "$@"')


class SandboxUnavailable(RuntimeError):
    """The host has no way to run the command confined; it runs nothing instead."""


def bubblewrap() -> str:
    found = shutil.which("bwrap")
    if not found:
        raise SandboxUnavailable(NO_BUBBLEWRAP)
    return found


def sandbox_root() -> Path:
    return Path(settings.VAR_DIR) / "sandboxes"


def limits() -> dict[str, int]:
    return {
        "cpu": settings.AHP_SANDBOX_CPU_SECONDS,
        "as": settings.AHP_SANDBOX_MEMORY_MB * 1024 * 1024,
        "nproc": settings.AHP_SANDBOX_PROCESSES,
        "nofile": 4096,
        "fsize": settings.AHP_SANDBOX_FILE_MB * 1024 * 1024,
    }


def bridge_python() -> str:
    """A Python for the bridge that the sandbox's user can run: the system's, else the host's own."""
    for candidate in ("/usr/bin/python3", getattr(sys, "_base_executable", None)):
        if candidate and os.access(candidate, os.X_OK):
            return os.path.realpath(candidate)
    raise SandboxUnavailable("This host cannot start a sandbox: no Python for its bridge.")


def program_prefix(command: str) -> str | None:
    """The folder a program outside /usr (pyenv, nvm, an operator's /opt) is bound with so it
    runs in a sandbox, or None."""
    program = os.path.realpath(shutil.which(command) or command)
    if program.startswith("/usr/") or not os.path.isabs(program):
        return None
    return str(Path(program).parents[1])


@dataclass(frozen=True)
class Sandbox:
    """The confinement of one session's commands. `key` names it (the session id)."""

    key: str
    tenant_id: int | None = None  # whose group its user is in
    writable: tuple[str | Path, ...] = ()  # the tenant's folders (checked to lie in its workspace root), bound writable
    read_only: tuple[str, ...] = ()
    destinations: tuple[tuple, ...] = ()  # (host, port) pairs the proxy forwards to, each under the outbound rule
    host_destinations: tuple[tuple, ...] = ()  # the host's own listeners (its tools endpoint)
    check: Callable[[str, int, bool], list[str]] = field(default=check_destination, compare=False)  # the outbound rule for `destinations`
    limit_overrides: tuple[tuple[str, int], ...] = ()  # (name, value) pairs tighter than the host's limits (a disposable computer's)
    host_writable: tuple[str, ...] = ()  # folders the host made for the tenant's sandboxes (a harness's state), bound writable
    stand_ins: tuple[StandIn, ...] = ()  # proxy.StandIn: endpoints whose credentials the proxy adds, so none is inside

    @property
    def reaches_out(self) -> bool:
        return bool(self.destinations or self.host_destinations or self.stand_ins)

    @property
    def working_directory(self) -> str:
        return str(self.writable[0]) if self.writable else HOME

    @property
    def folder(self) -> Path:
        return sandbox_root() / self.key

    @property
    def alive_marker(self) -> Path:
        return self.folder / "control" / "alive"

    @property
    def privileged(self) -> bool:
        return os.geteuid() == 0

    def owner(self) -> tuple[int, int]:
        """(uid, gid) its processes run as: its own user, in its tenant's group."""
        if not self.privileged:
            return os.getuid(), os.getgid()
        uid = identity.sandbox_user(self.key)
        return uid, identity.tenant_group(self.tenant_id) if self.tenant_id is not None else uid

    def prepare(self) -> None:
        control = self.folder / "control"
        control.mkdir(parents=True, exist_ok=True)
        uid, gid = self.owner()
        (control / "passwd").write_text(f"sandbox:x:{uid}:{gid}:sandbox:{HOME}:/bin/sh\n")
        (control / "group").write_text(f"sandbox:x:{gid}:\n")
        self.alive_marker.touch()

    def home(self) -> str:
        """The descriptor path of its home (homes.py), held as a launch's folders are."""
        release_held(self.key, older_than=HELD_SECONDS)
        fd = home_folder(self.key, self.owner())
        HELD.setdefault(self.key, []).append((time.monotonic(), fd))
        return f"/proc/{os.getpid()}/fd/{fd}"

    def tenant_folders(self) -> list[tuple[str, str | Path]]:
        """(descriptor path, path) for each of `writable` that is, right now, a folder beneath the
        tenant's root reached through no link; a folder that is not is left out (and logged)."""
        if not self.writable:
            return []
        release_held(self.key, older_than=HELD_SECONDS)
        root = open_root(host_root())
        held, opened = HELD.setdefault(self.key, []), []
        try:
            for path in self.writable:
                try:
                    fd = open_beneath(root, relative_to_host_root(path), os.O_RDONLY | os.O_DIRECTORY)
                except OSError as error:
                    if error.errno != errno.ENOENT:  # a folder not made yet is simply not there
                        logger.warning("Left %s out of sandbox %s: %s.", path, self.key, error.strerror)
                    continue
                held.append((time.monotonic(), fd))
                self.share_with_tenant(fd)
                opened.append((f"/proc/{os.getpid()}/fd/{fd}", path))
        finally:
            os.close(root)
        return opened

    def share_with_tenant(self, fd: int) -> None:
        """A tenant folder its sessions can all write: the tenant's group, group-writable (the
        folder itself, by its descriptor; nothing in it is touched)."""
        if not self.privileged or self.tenant_id is None:
            return
        gid, mode = self.owner()[1], os.fstat(fd).st_mode
        if os.fstat(fd).st_gid != gid:
            os.fchown(fd, -1, gid)
        if mode & GROUP_SHARED != GROUP_SHARED:
            os.fchmod(fd, (mode | GROUP_SHARED) & 0o7777)

    def make_folder(self, path: str) -> None:
        """Make `path` (a tenant's folder) as this sandbox's user, through no link."""
        parent, name = os.path.split(relative_to_host_root(path))
        root = open_root(host_root())
        try:
            with as_identity(*self.owner()):
                folder = open_beneath(root, parent, os.O_RDONLY | os.O_DIRECTORY)
                try:
                    os.mkdir(name, 0o2775, dir_fd=folder)
                except FileExistsError:
                    pass
                finally:
                    os.close(folder)
        finally:
            os.close(root)

    def argv(self, command: Sequence[str], env: Mapping[str, str] | None = None, cwd: str | None = None,
             private: Path | None = None) -> list[str]:
        """The host command line that runs `command` in this sandbox; `private`, a folder from
        `private_folder`, is bound at PRIVATE in this launch only."""
        self.prepare()
        syscalls = seccomp.filter_file()
        args = Mounts([bubblewrap(), "--args", "3", *(("--seccomp", "5") if syscalls else ()), "--die-with-parent",
                       "--new-session", "--unshare-net", "--unshare-pid",
                       "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try", "--hostname", "sandbox"],
                      existing=MERGED_USR)
        if not self.privileged:
            args.append("--unshare-user")
        python = bridge_python()
        self.mount_system(args, python, command[0])
        launch = self.mount_session(args, private)
        args.extend(["--chdir", cwd or self.working_directory, "--", *self.bridge_command(python)])
        return ["/bin/sh", "-c", LAUNCH, str(self.environment_file(self.launch_environment(env))),
                str(launch.lifeline if launch else os.devnull), str(cgroups.group_for(self.key) or "-"),
                str(syscalls or os.devnull), *args, "--", *command]

    def mount_system(self, args: Mounts, python: str, program: str) -> None:
        """The host's system folders read-only, /proc, /dev and a /tmp of its own, and the folders of
        the bridge's Python and of `program` when they live outside /usr."""
        for path in SYSTEM_PATHS:
            if os.path.exists(path):
                args.mount("--ro-bind", path)
        for path in MERGED_USR:
            if os.path.islink(path):
                args.extend(["--symlink", os.readlink(path), path])
            elif os.path.isdir(path):
                args.mount("--ro-bind", path)
        # /tmp is everyone's, as on any host: the sandbox's user (after setpriv) writes there too.
        args.extend(["--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--tmpfs", "/tmp"])
        for prefix in (program_prefix(python), program_prefix(program)):
            if prefix and prefix not in args.made:
                args.mount("--ro-bind", prefix)

    def mount_session(self, args: Mounts, private: Path | None) -> Launch | None:
        """The session's folders, its home and control files, `private`, and the launch's proxy."""
        for path in self.read_only:
            if os.path.exists(path):
                args.mount("--ro-bind", os.path.realpath(path), path)
        for source, folder in self.tenant_folders():
            args.mount("--bind", source, folder)
        for path in self.host_writable:
            args.mount("--bind", self.host_folder(path), path)
        control = self.folder / "control"
        args.mount("--bind", self.home(), HOME)
        args.mount("--ro-bind", control, CONTROL)
        args.mount("--ro-bind", control / "passwd", "/etc/passwd")
        args.mount("--ro-bind", control / "group", "/etc/group")
        args.mount("--ro-bind", BRIDGE, "/.bridge.py")
        if private:
            args.mount("--ro-bind", private, PRIVATE)
        if not self.reaches_out:
            return None
        # A socket of this launch's own: a later launch never inherits it.
        launch = PROXIES.serve_launch(self.folder / "proxies", Destinations(
            self.destinations, self.host_destinations, self.check, self.stand_ins))
        args.mount("--ro-bind", launch.socket, PROXY_SOCKET)
        return launch

    def launch_environment(self, env: Mapping[str, str] | None) -> dict[str, str]:
        """The command's whole environment: the sandbox's own, its proxy when it reaches out, then `env`."""
        environment = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": HOME, "LANG": "C.UTF-8",
                       "TMPDIR": "/tmp", "USER": "sandbox", **GIT_SHARED}
        if self.reaches_out:
            proxy = f"http://127.0.0.1:{PROXY_PORT}"
            for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY"):
                environment[name] = proxy
        return {**environment, **(env or {})}

    def bridge_command(self, python: str) -> list[str]:
        """What bubblewrap runs: setpriv to the sandbox's user (a root host), then the bridge under the limits."""
        args = []
        if self.privileged:
            uid, gid = self.owner()
            args.extend(["/usr/bin/setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups",
                         "--no-new-privs"])
        args.extend([python, "-I", "-S", "/.bridge.py", "--alive", f"{CONTROL}/alive"])
        if self.reaches_out:
            args.extend(["--proxy", PROXY_SOCKET, "--port", str(PROXY_PORT)])
        for name, value in {**limits(), **dict(self.limit_overrides)}.items():
            args.extend(["--limit", f"{name}={value}"])
        return args

    def private_folder(self, files: Mapping[str, str]) -> Path:
        """A folder of `files` ({name: text}) for one launch (argv's `private`): its command reads
        them, readable by the sandbox's user alone; another launch of the session (a member's
        terminal) runs in a mount namespace without it, so a secret there stays the launch's."""
        self.prepare()
        folder = self.folder / "private" / uuid.uuid4().hex
        folder.mkdir(mode=0o700, parents=True)
        uid, gid = self.owner()
        for name, text in files.items():
            with open(os.open(folder / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o400), "w") as file:
                file.write(text)
            if self.privileged:
                os.chown(folder / name, uid, gid)  # just made by the host, in a folder no sandbox writes
        if self.privileged:
            os.chown(folder, uid, gid)
        return folder

    def host_folder(self, path: str) -> str:
        """A folder the host made for the tenant, bound by its real path: its group's, group-writable."""
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            self.share_with_tenant(fd)
        finally:
            os.close(fd)
        return os.path.realpath(path)

    def environment_file(self, environment: Mapping[str, str]) -> Path:
        """A file of bubblewrap arguments that clear the environment and set `environment`,
        readable by the host alone; the launch removes it."""
        folder = self.folder / "launch"
        folder.mkdir(mode=0o700, exist_ok=True)
        path = folder / uuid.uuid4().hex
        fields = ["--clearenv", *(part for name, value in environment.items() for part in ("--setenv", name, value))]
        with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as file:
            file.write("".join(f"{part}\0" for part in fields))
        return path

    def run(self, command: Sequence[str], env: Mapping[str, str] | None = None, cwd: str | None = None,
            timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """Run a short command to completion (bounded in time); its CompletedProcess."""
        return subprocess.run(self.argv(command, env, cwd), capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)


def release_held(key: str, older_than: float | None = None) -> None:
    """Close the folder descriptors launches of `key` held (those older than `older_than` s)."""
    kept = []
    for opened, fd in HELD.pop(key, []):
        if older_than is not None and time.monotonic() - opened < older_than:
            kept.append((opened, fd))
        else:
            os.close(fd)
    if kept:
        HELD[key] = kept


def end_sandbox(key: object, own_folder: str | Path | None = None, tenant_id: int | None = None) -> None:
    """The session is gone: everything still running in its sandbox ends, its proxy stops, its
    home is removed, its own folder (`own_folder`, a path beneath the host's root, the session's `tenant_id`) is
    removed as its user once nothing of it runs, and its user id is free again."""
    folder = sandbox_root() / str(key)
    PROXIES.stop_under(folder / "proxies")
    release_held(str(key))
    uid = identity.existing_sandbox_user(str(key)) if os.geteuid() == 0 else None
    try:
        (folder / "control" / "alive").unlink()
    except FileNotFoundError:
        pass
    ended = uid is None or identity.kill_user(uid)
    if ended and own_folder is not None and (uid is not None or os.geteuid() != 0):
        remove_own_folder(Sandbox(str(key), tenant_id=tenant_id).owner(), Path(own_folder))
    if ended:
        remove_home(str(key))
        if uid is not None:
            identity.free_sandbox_user(str(key))
    cgroups.remove_group(str(key))
    shutil.rmtree(folder, ignore_errors=True)  # the bridge sees no marker either way


def remove_own_folder(owner: tuple[int, int], path: Path) -> None:
    """`path` and all in it removed as `owner` (uid, gid), by descriptor beneath the host's root:
    a link on the way is never followed, a link inside is removed, not followed."""
    root = open_root(str(host_root()))
    try:
        with as_identity(*owner):
            parent = open_beneath(root, relative_to_host_root(str(path.parent)), os.O_RDONLY | os.O_DIRECTORY)
            try:
                remove_tree(parent, path.name)
            finally:
                os.close(parent)
    except FileNotFoundError:
        pass
    except OSError as error:
        logger.warning("The session's own folder %s was not removed: %s", path, error.strerror)
    finally:
        os.close(root)


def session_folders(session: "Session") -> tuple[str, ...]:
    """The session's working directories, as paths (each checked to lie in its tenant's root when
    the session was made; the sandbox opens each without following a link as it starts)."""
    paths = (folder_path(str(directory)) for directory in session.working_directories or ())
    return tuple(os.path.normpath(path) for path in paths if path and os.path.isdir(path))


def session_sandbox(session: "Session", read_only: Iterable[str] = (), destinations: Iterable[tuple] = (),
                    host_destinations: Iterable[tuple] = ()) -> Sandbox:
    """The sandbox of `session`: its folders writable, `read_only` host paths readable."""
    return Sandbox(str(session.id), tenant_id=session.tenant_id, writable=session_folders(session),
                   read_only=tuple(read_only),
                   destinations=tuple(destinations), host_destinations=tuple(host_destinations))
