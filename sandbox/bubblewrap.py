"""One sandbox per session: how the host runs anything a tenant's session asks it to run.

Every command (a stdio MCP server, an ACP agent, `git` on a tenant's folder) starts under
bubblewrap with:
- its own mount namespace holding read-only system paths, the session's working directories
  (writable), a home folder of the session's own and nothing else of the host (no var dir, no
  database file, no project tree, no other session's folders);
- its own network namespace: only loopback, where the bridge (`bridge.py`) carries connections
  to the host's forwarding proxy, which reaches only the destinations the sandbox was opened
  with (`proxy.py`);
- its own PID, IPC and UTS namespaces, a cleared environment (no DATABASE_URL, SECRET_KEY,
  REDIS_URL or tokens: only what the command's own entry sets), and resource limits;
- an unprivileged user id: when the host runs as root, bubblewrap builds the namespaces as root
  and `setpriv` drops to `AHP_SANDBOX_UID` before anything of the tenant's runs, so the process
  is that user outside the sandbox too. A host run as another user runs bubblewrap in a user
  namespace instead, and the command keeps that user's id.
It ends with the process that started it, and with its session: deleting the session removes
the `alive` marker the bridge watches. Its environment (model keys, an MCP server's secrets) is
never on a command line, which every local user can read in /proc: bubblewrap reads it from a
file only the host can read, removed as the sandbox starts (`--args`).
"""
import logging
import os
import shutil
import subprocess
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings

from .outbound import check_destination
from .proxy import PROXIES, Destinations
from .workspaces import folder_path

logger = logging.getLogger(__name__)

NO_BUBBLEWRAP = ("This host cannot run commands for a tenant: bubblewrap (bwrap) is not installed, "
                 "and nothing a tenant's session asks for runs outside a sandbox.")
PROXY_PORT = 3128
CONTROL = "/.sandbox"  # the control folder, seen from inside
HOME = "/home/sandbox"
SYSTEM_PATHS = (
    "/usr", "/etc/alternatives", "/etc/ssl/certs", "/etc/ca-certificates", "/etc/ld.so.cache",
    "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime", "/etc/nsswitch.conf", "/etc/mime.types",
)
MERGED_USR = ("/bin", "/sbin", "/lib", "/lib64")
BRIDGE = Path(__file__).with_name("bridge.py")
# Opens the environment file ($0) as fd 3, removes it, then runs bubblewrap, which reads it there.
LAUNCH = 'exec 3< "$0" && /bin/rm -f -- "$0" && exec "$@"'


class SandboxUnavailable(RuntimeError):
    """The host has no way to run the command confined; it runs nothing instead."""


def bubblewrap():
    found = shutil.which("bwrap")
    if not found:
        raise SandboxUnavailable(NO_BUBBLEWRAP)
    return found


def sandbox_root():
    return Path(settings.VAR_DIR) / "sandboxes"


def limits():
    return {
        "cpu": settings.AHP_SANDBOX_CPU_SECONDS,
        "as": settings.AHP_SANDBOX_MEMORY_MB * 1024 * 1024,
        "nproc": settings.AHP_SANDBOX_PROCESSES,
        "nofile": 4096,
        "fsize": settings.AHP_SANDBOX_FILE_MB * 1024 * 1024,
    }


def bridge_python():
    """A Python for the bridge that the sandbox's user can run: the system's, else the host's own."""
    for candidate in ("/usr/bin/python3", sys._base_executable):
        if candidate and os.access(candidate, os.X_OK):
            return os.path.realpath(candidate)
    raise SandboxUnavailable("This host cannot start a sandbox: no Python for its bridge.")


def program_prefix(command):
    """The folder a program outside /usr (pyenv, nvm, an operator's /opt) is bound with so it
    runs in a sandbox, or None."""
    program = os.path.realpath(shutil.which(command) or command)
    if program.startswith("/usr/") or not os.path.isabs(program):
        return None
    return str(Path(program).parents[1])


def _ancestors(path):
    parts = Path(path).parts
    return [str(Path(*parts[:i])) for i in range(2, len(parts))]


@dataclass(frozen=True)
class Sandbox:
    """The confinement of one session's commands. `key` names it (the session id)."""

    key: str
    writable: tuple = ()
    read_only: tuple = ()
    destinations: tuple = ()  # (host, port) pairs the proxy forwards to, each under the outbound rule
    host_destinations: tuple = ()  # the host's own listeners (its tools endpoint)
    check: object = field(default=check_destination, compare=False)  # the outbound rule for `destinations`
    limit_overrides: tuple = ()  # (name, value) pairs tighter than the host's limits (a disposable computer's)

    @property
    def reaches_out(self):
        return bool(self.destinations or self.host_destinations)

    @property
    def working_directory(self):
        return self.writable[0] if self.writable else HOME

    @property
    def folder(self):
        return sandbox_root() / self.key

    @property
    def alive_marker(self):
        return self.folder / "control" / "alive"

    @property
    def privileged(self):
        return os.geteuid() == 0

    def owner(self):
        return (settings.AHP_SANDBOX_UID, settings.AHP_SANDBOX_UID) if self.privileged else (os.getuid(), os.getgid())

    def prepare(self):
        control, home = self.folder / "control", self.folder / "home"
        control.mkdir(parents=True, exist_ok=True)
        home.mkdir(parents=True, exist_ok=True)
        uid, gid = self.owner()
        (control / "passwd").write_text(f"sandbox:x:{uid}:{gid}:sandbox:{HOME}:/bin/sh\n")
        (control / "group").write_text(f"sandbox:x:{gid}:\n")
        self.alive_marker.touch()
        for path in (home, *self.writable):
            if self.privileged and Path(path).exists() and Path(path).stat().st_uid != uid:
                _chown_tree(path, uid, gid)
        if self.reaches_out:
            PROXIES.serve(control / "proxy.sock", Destinations(self.destinations, self.host_destinations, self.check))

    def argv(self, command, env=None, cwd=None):
        """The host command line that runs `command` in this sandbox."""
        self.prepare()
        args = [bubblewrap(), "--args", "3", "--die-with-parent", "--new-session", "--unshare-net", "--unshare-pid",
                "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try", "--hostname", "sandbox"]
        if not self.privileged:
            args.append("--unshare-user")
        made = set()

        def mount(flag, source, target=None):
            target = target or source
            for ancestor in _ancestors(target):
                if ancestor not in made and ancestor not in MERGED_USR:
                    args.extend(["--perms", "0755", "--dir", ancestor])
                    made.add(ancestor)
            args.extend([flag, str(source), str(target)])
            made.add(str(target))

        for path in SYSTEM_PATHS:
            if os.path.exists(path):
                mount("--ro-bind", path)
        for path in MERGED_USR:
            if os.path.islink(path):
                args.extend(["--symlink", os.readlink(path), path])
            elif os.path.isdir(path):
                mount("--ro-bind", path)
        # /tmp is everyone's, as on any host: the sandbox's user (after setpriv) writes there too.
        args.extend(["--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--tmpfs", "/tmp"])
        python = bridge_python()
        for prefix in (program_prefix(python), program_prefix(command[0])):
            if prefix and prefix not in made:
                mount("--ro-bind", prefix)
        for path in self.read_only:
            if os.path.exists(path):
                mount("--ro-bind", os.path.realpath(path), path)
        for path in self.writable:
            mount("--bind", os.path.realpath(path), path)
        control = self.folder / "control"
        mount("--bind", self.folder / "home", HOME)
        mount("--ro-bind", control, CONTROL)
        mount("--ro-bind", control / "passwd", "/etc/passwd")
        mount("--ro-bind", control / "group", "/etc/group")
        mount("--ro-bind", BRIDGE, "/.bridge.py")
        environment = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": HOME, "LANG": "C.UTF-8",
                       "TMPDIR": "/tmp", "USER": "sandbox"}
        if self.reaches_out:
            proxy = f"http://127.0.0.1:{PROXY_PORT}"
            for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY"):
                environment[name] = proxy
        environment.update(env or {})
        args.extend(["--chdir", cwd or self.working_directory, "--"])
        if self.privileged:
            uid, gid = self.owner()
            args.extend(["/usr/bin/setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups",
                         "--no-new-privs"])
        args.extend([python, "-I", "-S", "/.bridge.py", "--alive", f"{CONTROL}/alive"])
        if self.reaches_out:
            args.extend(["--proxy", f"{CONTROL}/proxy.sock", "--port", str(PROXY_PORT)])
        for name, value in {**limits(), **dict(self.limit_overrides)}.items():
            args.extend(["--limit", f"{name}={value}"])
        return ["/bin/sh", "-c", LAUNCH, str(self.environment_file(environment)), *args, "--", *command]

    def home_file(self, name, text):
        """Write `text` to `name` in the sandbox's home, readable by the sandbox's user alone (a
        secret its command reads from a file rather than its command line); its path inside."""
        self.prepare()
        path = self.folder / "home" / name
        with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as file:
            file.write(text)
        if self.privileged:
            os.chown(path, *self.owner())
        return f"{HOME}/{name}"

    def environment_file(self, environment):
        """A file of bubblewrap arguments that clear the environment and set `environment`,
        readable by the host alone; the launch removes it."""
        folder = self.folder / "launch"
        folder.mkdir(mode=0o700, exist_ok=True)
        path = folder / uuid.uuid4().hex
        fields = ["--clearenv", *(part for name, value in environment.items() for part in ("--setenv", name, value))]
        with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as file:
            file.write("".join(f"{part}\0" for part in fields))
        return path

    def run(self, command, env=None, cwd=None, timeout=60):
        """Run a short command to completion (bounded in time); its CompletedProcess."""
        return subprocess.run(self.argv(command, env, cwd), capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)


def _chown_tree(path, uid, gid):
    """The sandbox's user owns what it may write (the host, as root, still reads it)."""
    for root, dirs, files in os.walk(path):
        for name in (root, *[os.path.join(root, d) for d in dirs], *[os.path.join(root, f) for f in files]):
            os.lchown(name, uid, gid)
    os.lchown(path, uid, gid)


def end_sandbox(key):
    """The session is gone: everything still running in its sandbox ends, its proxy stops."""
    folder = sandbox_root() / str(key)
    PROXIES.stop(folder / "control" / "proxy.sock")
    try:
        (folder / "control" / "alive").unlink()
    except FileNotFoundError:
        return
    shutil.rmtree(folder, ignore_errors=True)  # its home goes with it; the bridge sees no marker either way


def session_folders(session):
    """The session's working directories that exist on this host, as paths."""
    paths = (folder_path(str(directory)) for directory in session.working_directories or ())
    return tuple(path for path in paths if path and os.path.isdir(path))


def session_sandbox(session, read_only=(), destinations=(), host_destinations=()):
    """The sandbox of `session`: its folders writable, `read_only` host paths readable."""
    return Sandbox(str(session.id), writable=session_folders(session), read_only=tuple(read_only),
                   destinations=tuple(destinations), host_destinations=tuple(host_destinations))
