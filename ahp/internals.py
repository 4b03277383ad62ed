"""The libraries' internals the host patches, overrides, imports or reads, in one table, and the
start-up check that each is still where the host expects it.

A release may move any of these without notice, so each library is pinned exactly in
pyproject.toml; a moved name would otherwise fail late, or (an override, a patch) do nothing at
all. Every process of the host (`ahp.serve`, `ahp.front`, `runhost`, the Celery worker) runs
`refuse_to_start_if_moved()` as it starts, and `ahp.serve` applies its patches through `patch()`
and `internal()`, which refuse a name this table does not hold.
"""
import importlib
import importlib.metadata
import inspect
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"


@dataclass(frozen=True)
class Internal:
    library: str  # the distribution, as pyproject.toml names it
    path: str  # a module, then attributes: "daphne.server.Server.run"
    verb: str  # what the host does with it: patches, overrides, imports, reads, sets
    by: str  # the host's module that does it
    set_by_library: bool = False  # an attribute the library sets on instances (found in its source)


def internals(library: str, by: str, verb: str, *paths: str, set_by_library: bool = False) -> list[Internal]:
    return [Internal(library, path, verb, by, set_by_library) for path in paths]


INTERNALS = (
    *internals("daphne", "ahp.serve", "patches", "daphne.server.WebSocketFactory", "daphne.server.HTTPFactory",
               "daphne.cli.AccessLogGenerator"),
    *internals("daphne", "ahp.serve", "overrides", "daphne.server.Server.run",
               "daphne.ws_protocol.WebSocketProtocol.serverSend", "daphne.ws_protocol.WebSocketProtocol.handle_reply"),
    *internals("daphne", "ahp.serve", "reads", "daphne.server.Server.http_factory", "daphne.cli.CommandLineInterface.parser",
               set_by_library=True),
    *internals("autobahn", "ahp.serve", "patches", "autobahn.websocket.protocol.pformat",
               "autobahn.websocket.protocol.hltype", "autobahn.websocket.protocol.hlval"),
    *internals("twisted", "ahp.serve", "imports", "twisted.web.http._GenericHTTPChannelProtocol"),
    *internals("twisted", "ahp.serve", "overrides", "twisted.web.http.HTTPChannel.connectionMade",
               "twisted.web.http.HTTPChannel.allContentReceived", "twisted.web.http.HTTPChannel.requestDone",
               "twisted.web.http.HTTPChannel.connectionLost"),
    *internals("twisted", "ahp.serve", "reads", "twisted.web.http.HTTPChannel._log",
               "twisted.web.http.HTTPChannel.persistent", "twisted.web.http.HTTPChannel.callLater",
               "twisted.internet.abstract.FileDescriptor.dataBuffer", "twisted.internet.abstract.FileDescriptor.offset"),
    *internals("twisted", "ahp.serve", "reads", "twisted.internet.abstract.FileDescriptor._tempDataLen",
               set_by_library=True),
    *internals("kombu", "kernel.filesystem_broker", "overrides", "kombu.transport.filesystem.Channel._put"),
    *internals("asgiref", "kernel.orm", "reads", "asgiref.sync.AsyncToSync.executors"),
    *internals("asgiref", "kernel.orm", "sets", "asgiref.sync.SyncToAsync.threadlocal.main_event_loop",
               "asgiref.sync.SyncToAsync.threadlocal.main_event_loop_pid", set_by_library=True),
    *internals("channels", "kernel.memory_layer", "overrides", "channels.layers.InMemoryChannelLayer._clean_expired"),
    *internals("channels-redis", "kernel.channel_layer", "imports", "channels_redis.utils._wrap_close"),
    *internals("channels-redis", "kernel.channel_layer", "overrides",
               "channels_redis.pubsub.RedisPubSubChannelLayer._get_layer",
               "channels_redis.pubsub.RedisSingleShardConnection._receive_message",
               "channels_redis.pubsub.RedisSingleShardConnection._do_receiving"),
    *internals("channels-redis", "kernel.channel_layer", "reads",
               "channels_redis.pubsub.RedisPubSubLoopLayer._get_shard",
               "channels_redis.pubsub.RedisPubSubLoopLayer._get_group_channel_name",
               "channels_redis.pubsub.RedisSingleShardConnection._ensure_redis",
               "channels_redis.pubsub.RedisSingleShardConnection._ensure_receiver"),
    *internals("channels-redis", "kernel.channel_layer", "reads", "channels_redis.pubsub.RedisPubSubChannelLayer._layers",
               "channels_redis.pubsub.RedisPubSubChannelLayer._args",
               "channels_redis.pubsub.RedisPubSubChannelLayer._kwargs",
               "channels_redis.pubsub.RedisPubSubLoopLayer._shards",
               "channels_redis.pubsub.RedisSingleShardConnection._lock",
               "channels_redis.pubsub.RedisSingleShardConnection._redis",
               "channels_redis.pubsub.RedisSingleShardConnection._pubsub", set_by_library=True),
    *internals("claude-agent-sdk", "agents.providers.claude", "imports",
               "claude_agent_sdk._internal.transport.subprocess_cli.SubprocessCLITransport"),
    *internals("claude-agent-sdk", "agents.providers.claude", "overrides",
               "claude_agent_sdk._internal.transport.subprocess_cli.SubprocessCLITransport._build_command"),
)
BY_PATH = {internal.path: internal for internal in INTERNALS}


class Moved(SystemExit):
    """An internal the host depends on is not in the installed library: the process ends, saying so."""


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pinned_versions() -> dict[str, str]:
    """{library: version} of the dependencies pinned with `==` (pyproject.toml, else the installed host's)."""
    if PYPROJECT.exists():
        requirements = tomllib.loads(PYPROJECT.read_text())["project"]["dependencies"]
    else:
        requirements = importlib.metadata.requires("ahp-host") or []
    pins = (re.match(r"\s*([A-Za-z0-9_.-]+)(?:\[[^]]*\])?\s*==\s*([^\s;,]+)", r) for r in requirements)
    return {normalized(pin[1]): pin[2] for pin in pins if pin}


def found(path: str) -> tuple[Any, ModuleType]:
    """The object at `path` and the last module on the way to it; LookupError(the missing name)."""
    parts = path.split(".")
    owner = module = importlib.import_module(parts[0])
    for at, name in enumerate(parts[1:], start=1):
        if isinstance(owner, ModuleType) and not hasattr(owner, name):
            try:
                owner = module = importlib.import_module(".".join(parts[:at + 1]))
                continue
            except ModuleNotFoundError:
                pass
        if not hasattr(owner, name):
            raise LookupError(name)
        owner = getattr(owner, name)
        module = owner if isinstance(owner, ModuleType) else module
    return owner, module


def resolved(internal: Internal) -> Any:
    """The object at `internal.path` (None for one set by the library); raises Moved when missing."""
    try:
        return found(internal.path)[0]
    except LookupError as missing:
        owner, name = internal.path.rsplit(".", 1)
        if internal.set_by_library and missing.args[0] == name:
            module = found(owner)[1]
            if re.search(rf"\.{name}\b", inspect.getsource(module)):
                return None  # set on instances (or a thread's local) by the library's own code
        raise Moved(refusal(internal, missing.args[0])) from None


def refusal(internal: Internal, missing: str) -> str:
    pinned = pinned_versions().get(normalized(internal.library), "(not pinned)")
    return (f"{internal.library} {pinned} is pinned for {internal.by}, which {internal.verb} {internal.path}; "
            f"the installed {internal.library} has no {missing}.")


def listed(path: str) -> Internal:
    if path not in BY_PATH:
        raise LookupError(f"{path} is not in ahp/internals.py's table: list it there, pinning its library.")
    return BY_PATH[path]


def internal(path: str) -> Any:
    """The library's object at `path`, which the table must hold."""
    return resolved(listed(path))


def patch(path: str, replacement: Any) -> None:
    """Replace the library's attribute at `path` (which the table must hold) with `replacement`."""
    resolved(listed(path))
    owner, name = path.rsplit(".", 1)
    setattr(found(owner)[0], name, replacement)


def refuse_to_start_if_moved() -> None:
    """End the process (Moved, a SystemExit: its sentence, no traceback) when an internal is missing."""
    for each in INTERNALS:
        resolved(each)
