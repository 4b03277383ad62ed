"""The harness CLIs the project installs (`make harness`: npm, pinned, under var/harness) and the
model endpoint each provider talks to. Nothing here downloads anything: a missing CLI is a
sentence naming the command that installs it."""
import asyncio
import functools
import logging
import os
import platform
import stat
import subprocess
import uuid
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, AsyncIterator, Callable, Coroutine, Generic, TypedDict, TypeVar
from urllib.parse import urlparse

from django.conf import settings

from kernel.lru_cache import LruCache

if TYPE_CHECKING:
    from tools_app.runtime.toolbox import ChatToolbox

logger = logging.getLogger(__name__)


class AgentConnection(TypedDict, total=False):
    """A model endpoint a harness talks to: the tenant's agentConnections entry or the host's own."""

    type: str
    baseUrl: str
    apiKey: str
    wireApi: str
    model: str
    githubToken: str
    agent: str  # an ACP agent's command line
    permissions: str  # "approve-all": the harness runs its built-ins without asking the person

INSTALL = "make harness"


def harness_dir() -> str:
    return os.environ.get("AHP_HARNESS_DIR") or os.path.join(settings.BASE_DIR, "var", "harness")


@functools.lru_cache(maxsize=16)
def installed_program(harness: str, *parts: str) -> str:
    """Where `make harness` puts a program under the folder `harness`. Joined once per folder, not
    on each of the several times a model request asks which agents can start."""
    return os.path.join(harness, "node_modules", *parts)


# (path, device, inode, modified) -> the real path. Every model request asks which agents can
# start (their programs' paths are part of the catalog's key), and realpath reads each component.
_REAL_PATHS = LruCache(64)


def executable(path: str | None) -> str | None:
    """The program's real path: the sandbox binds real paths, so a symlinked var/harness works too."""
    if not path:
        return None
    try:
        found = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISREG(found.st_mode) or not os.access(path, os.X_OK):
        return None
    return _REAL_PATHS.get_or_make((str(path), found.st_dev, found.st_ino, found.st_mtime_ns),
                                   lambda: os.path.realpath(path))


def claude_cli() -> str | None:
    """Claude Code's native executable, or None."""
    configured = os.environ.get("AHP_CLAUDE_CLI_PATH")
    if configured:
        return executable(configured)
    return executable(installed_program(harness_dir(), "@anthropic-ai", "claude-code", "bin", "claude.exe"))


# The Copilot CLI's npm package for this machine's architecture.
COPILOT_MACHINE = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64"}.get(platform.machine().lower(), platform.machine())


def copilot_cli() -> str | None:
    """The GitHub Copilot CLI's native executable (the npm loader needs a newer Node), or None."""
    configured = os.environ.get("COPILOT_CLI_PATH")
    if configured:
        return executable(configured)
    return executable(installed_program(harness_dir(), "@github", f"copilot-linux-{COPILOT_MACHINE}", "copilot"))


def unpacked_copilot_package(cli: str) -> str | None:
    """The folder the host has the Copilot CLI `cli` unpack its native package into (under the
    harness folder, not a tenant's path), or None when that failed."""
    folder = os.path.join(harness_dir(), "copilot-package")
    try:
        os.makedirs(folder, mode=0o755, exist_ok=True)
        # Unpacking only (the CLI's own mode for it); readable by every sandbox's user.
        subprocess.run([cli, "--binary-version"], cwd=folder, stdin=subprocess.DEVNULL, capture_output=True,
                       check=True, timeout=300, umask=0o022,
                       env={"PATH": "/usr/bin:/bin", "HOME": folder, "COPILOT_SEA_EXTRACT_ONLY": "1",
                            "COPILOT_PKG_CACHE_HOME": folder})
    except (OSError, subprocess.SubprocessError) as error:
        logger.warning("The Copilot CLI's package could not be unpacked in %s (%s): each sandbox unpacks its own.",
                       folder, error)
        return None
    return folder


_COPILOT_PACKAGES: dict[tuple[str, int], str | None] = {}  # (the CLI's path, its modification time) -> its unpacked package's folder, or None


async def copilot_package(cli: str) -> str | None:
    """The folder holding the Copilot CLI's unpacked native package (~235 MB), unpacked once per
    node: a sandbox binds it read-only and names it to the CLI (COPILOT_PKG_CACHE_HOME), which then
    unpacks nothing into the sandbox's home. None when it could not be unpacked."""
    key = (cli, os.stat(cli).st_mtime_ns)
    if key not in _COPILOT_PACKAGES:
        _COPILOT_PACKAGES[key] = await asyncio.to_thread(unpacked_copilot_package, cli)
    return _COPILOT_PACKAGES[key]


CLAUDE_BASE_URL = "https://api.anthropic.com"


def host_connection(provider: str) -> AgentConnection:
    """The host's own model endpoint for `provider`, from its environment (ANTHROPIC_*,
    AHP_CLAUDE_MODEL, AHP_COPILOT_*): where a turn goes when the tenant names no endpoint of its
    own. Its key is for that endpoint only (tools_app.agent_connections keeps it there)."""
    environ = os.environ.get
    if provider == "claude":
        return {"baseUrl": environ("ANTHROPIC_BASE_URL") or CLAUDE_BASE_URL, "apiKey": environ("ANTHROPIC_API_KEY", ""),
                "model": environ("AHP_CLAUDE_MODEL", "")}
    if provider == "github-copilot":
        return {"type": environ("AHP_COPILOT_TYPE", "openai"), "baseUrl": environ("AHP_COPILOT_BASE_URL", ""),
                "apiKey": environ("AHP_COPILOT_API_KEY", ""), "wireApi": environ("AHP_COPILOT_WIRE_API", "completions"),
                "model": environ("AHP_COPILOT_MODEL", "")}
    return {}


def not_installed(agent: str, package: str, variable: str) -> str:
    return (f"The {agent} agent cannot run on this host: {package} is not installed. "
            f"Run `{INSTALL}` (npm, into var/harness) or set {variable} to its executable.")


def permission_title(name: str, command: str | None = None) -> str:
    return f"Allow the agent to run `{command}`?" if command else f"Allow the agent's {name}?"


async def builtin_permission(toolbox: "ChatToolbox", connection: AgentConnection, name: str, arguments: dict,
                             command: str | None = None) -> str | None:
    """None when the harness may run its own built-in `name` (the tenant's agentConnections entry
    approves all, or the person allows it: an AHP tool confirmation), else the sentence its model reads."""
    if connection.get("permissions") == "approve-all":
        return None
    return await toolbox.ask_permission(name, arguments, permission_title(name, command))


def destination(url: str) -> tuple[str | None, int]:
    """The (host, port) a sandbox must reach for `url`."""
    parts = urlparse(url)
    return parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)


Handle = TypeVar("Handle")


class RunningTurns(Generic[Handle]):
    """Each session's running harness turn, so a cancelled turn can be interrupted: on the loop
    the turn runs on, since a cancel may arrive on another (a sync view's)."""

    def __init__(self) -> None:
        # AHP session id -> (loop, the harness handle its interrupt is called on)
        self.turns: dict[uuid.UUID, tuple[asyncio.AbstractEventLoop, Handle]] = {}
        self.interrupted: set[uuid.UUID] = set()  # sessions whose running turn was cancelled: its error is no failure

    @asynccontextmanager
    async def running(self, session_id: uuid.UUID, handle: Handle) -> AsyncIterator[None]:
        self.interrupted.discard(session_id)
        self.turns[session_id] = (asyncio.get_running_loop(), handle)
        try:
            yield
        finally:
            self.turns.pop(session_id, None)

    async def interrupt(self, session_id: uuid.UUID, stop: Callable[[Handle], Coroutine[Any, Any, object]]) -> None:
        """`stop(handle)` for the session's running turn, if one runs."""
        running = self.turns.get(session_id)
        if running is None:
            return
        loop, handle = running
        self.interrupted.add(session_id)
        if loop is asyncio.get_running_loop():
            await stop(handle)
        else:
            await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(stop(handle), loop))
