"""The forwarding proxy: a sandbox's only way out of its network namespace.

A Unix socket bound into the sandbox, where the bridge carries 127.0.0.1:<port> to it: one per
sandbox (`ProxyLoop.serve`), or one per launch (`ProxyLoop.serve_launch`: bound into that
launch alone and served until it ends, so a later launch of the session never inherits another's
destinations). It speaks the HTTP proxy protocol: `CONNECT host:port` for TLS and absolute-form
requests for plain HTTP, and forwards only to the destinations it was given (an agent's model
endpoint, its http MCP servers, the host's own tools endpoint: that path alone when it is plain
HTTP). Anything else is answered 403 with a sentence. All proxies of a process run on one event
loop in a thread of their own, so a sandbox outlives the request or the short-lived loop that
started it.
"""
import asyncio
import logging
import os
import shutil
import socket
import ssl
import threading
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import NamedTuple
from urllib.parse import urlsplit

from kernel.orm import with_checked_connections

from .outbound import OutboundRefused, check_destination, host_and_port

logger = logging.getLogger(__name__)

HEAD_LIMIT = 16 * 1024
CONNECT_TIMEOUT_SECONDS = 10


def refusal_sentence(host: str, port: int) -> str:
    return (f"This sandbox may not connect to {host_and_port(host, port)}: it is not one of the destinations its "
            "session was given.")


def own_path_sentence(host: str, port: int, path: str) -> str:
    return f"This sandbox may reach only {path} on {host_and_port(host, port)}: the session's tools endpoint."


STAND_IN_DOMAIN = "ahp-sandbox.invalid"  # no name under it exists anywhere: only the proxy answers it
PLACEHOLDER_KEY = "sandbox-holds-no-key"  # what a harness is given where it insists on a key


class StandIn(NamedTuple):
    """An endpoint whose credentials the proxy adds: inside the sandbox it is plain
    `http://<alias>.ahp-sandbox.invalid/<path>`; the proxy sends the request on to `url` (its
    scheme and authority, TLS included) with `headers` set, whatever the sandbox put in them. So
    a model key or an MCP server's headers never enter the sandbox: not its environment, files
    or memory."""

    alias: str
    url: str
    headers: tuple[tuple[str, str], ...] = ()  # (name, value) pairs
    declared: bool = False  # a server a client declared (the outbound rule is stricter for it)

    @property
    def host(self) -> str:
        return f"{self.alias}.{STAND_IN_DOMAIN}"

    def inside(self, url: str) -> str:
        """`url` (an address of this endpoint) as the sandbox is to use it: without its query,
        which the proxy adds back (a query may hold a key too)."""
        parts = urlsplit(url)
        return parts._replace(scheme="http", netloc=self.host, query="").geturl()

    @property
    def target(self) -> tuple[str, str, int]:
        parts = urlsplit(self.url)
        return parts.scheme, parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80)

    def request_head(self, head: bytes) -> bytes:
        """The origin-form head to send on: its Host the endpoint's, `headers` set in place of the
        sandbox's, one request per connection."""
        request_line, _, rest = head.partition(b"\r\n")
        method, target, version = request_line.decode("latin-1").split(" ", 2)
        path = "/" + target[len("http://"):].partition("/")[2]
        if query := urlsplit(self.url).query:
            path += ("&" if "?" in path else "?") + query
        replaced = {b"host", b"connection", b"proxy-connection", b"keep-alive",
                    *(name.lower().encode("latin-1") for name, _ in self.headers)}
        kept = [line for line in rest.split(b"\r\n") if line and line.split(b":", 1)[0].strip().lower() not in replaced]
        added = [f"{name}: {value}".encode("latin-1") for name, value in self.headers]
        authority = urlsplit(self.url).netloc.rpartition("@")[2]  # never a user:password of the URL
        return b"\r\n".join([f"{method} {path} {version}".encode("latin-1"), f"Host: {authority}".encode("latin-1"),
                              *kept, *added, b"Connection: close", b"", b""])


class Destinations:
    """What one sandbox may reach. `own`: the host's own listeners, (host, port) or (host, port,
    path): a plain-HTTP tools endpoint, of which only that path is reached (no CONNECT, which
    would reach all of the host's server). `allowed`: the others, (host, port) or (host, port,
    True) for a server a client declared; each must also pass the outbound rule (`sandbox.outbound`)."""

    def __init__(self, allowed: Iterable[tuple], own: Iterable[tuple] = (),
                 check: Callable[[str, int, bool], list[str]] = check_destination,
                 stand_ins: Iterable[StandIn] = ()) -> None:
        self.stand_ins = {stand_in.host: stand_in for stand_in in stand_ins}
        self.allowed: dict[tuple[str, int], bool] = {}  # (host, port) -> whether only a client declared it
        for host, port, *declared in (*allowed, *((*s.target[1:], s.declared) for s in stand_ins)):
            key = (host.lower(), int(port))
            self.allowed[key] = self.allowed.get(key, True) and bool(declared and declared[0])
        self.own = {(host.lower(), int(port)): path[0] if path else None for host, port, *path in own}
        self.check = check

    def resolve(self, host: str, port: int, path: str | None = None) -> tuple[str | None, str | None]:
        """(refusal sentence, None) or (None, the address to connect to): the checked one, so a
        name cannot resolve elsewhere between the check and the connection. `path`: an
        absolute-form request's (None for CONNECT)."""
        key = (host.lower(), port)
        if key in self.own:
            endpoint = self.own[key]
            if endpoint is not None and (path is None or path.partition("?")[0] != endpoint):
                return own_path_sentence(host, port, endpoint), None
            return None, host
        if key not in self.allowed:
            return refusal_sentence(host, port), None
        try:
            return None, self.check(host, port, self.allowed[key])[0]
        except OutboundRefused as refused:
            return refused.sentence, None
        except Exception:  # the rule could not be read (its database away): closed, not open
            logger.exception("Sandbox proxy could not check %s:%s", host, port)
            return f"This sandbox may not connect to {host}:{port} now: the host could not check it.", None


def split_host_port(authority: str, default_port: int) -> tuple[str, int]:
    if authority.startswith("["):  # [v6]:port
        host, _, rest = authority[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
    elif authority.count(":") == 1:
        host, _, port = authority.partition(":")
    else:
        host, port = authority, ""
    return host, int(port) if port.isdigit() else default_port


def parse_head(head: bytes) -> tuple[str, str, int, str | None, bytes | None]:
    """(method, host, port, path, the head to send on) of a proxy request head; path and head
    are None for CONNECT."""
    request_line, _, rest = head.partition(b"\r\n")
    method, target, version = request_line.decode("latin-1").split(" ", 2)
    if method == "CONNECT":
        host, port = split_host_port(target, 443)
        return method, host, port, None, None
    if not target.startswith("http://"):
        raise ValueError("a proxy request names an absolute http:// URL")
    authority, _, path = target[len("http://"):].partition("/")
    host, port = split_host_port(authority, 80)
    # One request per connection: the next one on a kept-alive connection would reach the
    # origin unchecked and in proxy form, so the origin is asked to close after answering.
    headers = [line for line in rest.split(b"\r\n")
               if line and not line.lower().startswith((b"connection:", b"proxy-connection:", b"keep-alive:"))]
    forwarded = b"\r\n".join([f"{method} /{path} {version}".encode("latin-1"), *headers, b"Connection: close",
                               b"", b""])
    return method, host, port, f"/{path}", forwarded


async def pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while chunk := await reader.read(65536):
            writer.write(chunk)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        writer.close()


async def refuse(writer: asyncio.StreamWriter, sentence: str, status: str = "403 Forbidden") -> None:
    body = sentence.encode()
    writer.write(f"HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {len(body)}\r\n"
                 "Connection: close\r\n\r\n".encode() + body)
    await writer.drain()
    writer.close()


async def serve_one(destinations: Destinations, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
        writer.close()
        return
    try:
        method, host, port, path, forwarded = parse_head(head)
    except ValueError as exc:
        await refuse(writer, f"Bad proxy request: {exc}.", "400 Bad Request")
        return
    stand_in = destinations.stand_ins.get(host.lower()) if forwarded is not None else None
    tls = None
    if stand_in is not None:
        scheme, host, port = stand_in.target
        forwarded = stand_in.request_head(head)
        tls = ssl.create_default_context() if scheme == "https" else None
    # The allow-list is read from the database on an executor thread: its connection is checked as
    # the ORM threads' are, so one that died with the database does not refuse every request after.
    sentence, address = await asyncio.get_running_loop().run_in_executor(
        None, with_checked_connections, destinations.resolve, host, port, path)
    if sentence:
        logger.warning("Sandbox proxy refused %s %s:%s: %s", method, host, port, sentence)
        await refuse(writer, sentence)
        return
    try:
        up_reader, up_writer = await asyncio.wait_for(
            asyncio.open_connection(address, port, ssl=tls, server_hostname=host if tls else None),
            CONNECT_TIMEOUT_SECONDS)
    except (OSError, asyncio.TimeoutError) as exc:
        await refuse(writer, f"{host}:{port} did not answer: {exc.__class__.__name__}.", "502 Bad Gateway")
        return
    if forwarded is None:
        writer.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")
        await writer.drain()
    else:
        up_writer.write(forwarded)
        await up_writer.drain()
    await asyncio.gather(pump(reader, up_writer), pump(up_reader, writer))


def listening_unix_socket(path: str) -> socket.socket:
    """A Unix socket bound at `path` however deep its folder: a socket's address holds 108 bytes,
    so it is bound through /proc/self/fd/<the folder>, which names the same folder briefly."""
    folder = os.open(os.path.dirname(path), os.O_RDONLY | os.O_DIRECTORY)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(f"/proc/self/fd/{folder}/{os.path.basename(path)}")
    except OSError:
        sock.close()
        raise
    finally:
        os.close(folder)
    return sock


class Launch(NamedTuple):
    """One launch's proxy: the socket to bind into it alone, and its lifeline, a FIFO the launch
    holds open for writing from before bubblewrap starts (every process of the sandbox inherits
    it); when the last holder has exited, the sandbox has ended and its socket stops."""

    socket: Path
    lifeline: Path


class ProxyLoop:
    """One event loop thread per process serving every sandbox proxy of the process."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.servers: dict[str, tuple[asyncio.Server, Destinations]] = {}  # socket path -> (server, Destinations)
        self.lifelines: dict[str, int] = {}  # a launch's socket path -> its lifeline's read descriptor

    def _loop(self) -> asyncio.AbstractEventLoop:
        with self.lock:
            if self.loop is None:
                self.loop = asyncio.new_event_loop()
                threading.Thread(target=self.loop.run_forever, name="sandbox-proxy", daemon=True).start()
            return self.loop

    def serve(self, path: str | Path, destinations: Destinations) -> None:
        """Serve `destinations` on the Unix socket `path` (replacing what it served before)."""
        path = str(path)
        loop = self._loop()
        existing = self.servers.get(path)
        if existing is not None:
            existing[1].__dict__.update(destinations.__dict__)
            return

        async def start() -> asyncio.Server:
            if os.path.exists(path):
                os.unlink(path)
            server = await asyncio.start_unix_server(lambda r, w: serve_one(destinations, r, w),
                                                     sock=listening_unix_socket(path), limit=HEAD_LIMIT)
            os.chmod(path, 0o666)  # the sandbox's user connects to it; only the sandbox sees the folder
            return server

        server = asyncio.run_coroutine_threadsafe(start(), loop).result(10)
        self.servers[path] = (server, destinations)

    def serve_launch(self, folder: str | Path, destinations: Destinations) -> Launch:
        """A Launch: `destinations` served on a socket of its own, in a new folder under `folder`
        (which no sandbox sees), until its lifeline's last holder exits or stop_under(folder)."""
        launch = Path(folder) / uuid.uuid4().hex
        launch.mkdir(mode=0o700, parents=True)  # the socket alone is bound into its sandbox
        lifeline = launch / "lifeline"
        os.mkfifo(lifeline, 0o600)
        # Opened before the launch: a FIFO read end with no writer yet is quiet, then reads
        # end-of-file once every writer has closed it.
        fd = os.open(lifeline, os.O_RDONLY | os.O_NONBLOCK)
        socket_path = launch / "proxy.sock"
        try:
            self.serve(socket_path, destinations)
        except BaseException:
            os.close(fd)
            raise
        self.lifelines[str(socket_path)] = fd
        loop = self._loop()
        loop.call_soon_threadsafe(loop.add_reader, fd, self._lifeline_read, fd, str(socket_path))
        return Launch(socket_path, lifeline)

    def _lifeline_read(self, fd: int, path: str) -> None:
        try:
            ended = not os.read(fd, 4096)  # what a sandbox process writes into it means nothing
        except BlockingIOError:
            return
        if ended:
            self.stop(path)

    def stop(self, path: str | Path) -> None:
        path = str(path)
        entry = self.servers.pop(path, None)
        fd = self.lifelines.pop(path, None)
        loop = self.loop
        if loop is None:
            return

        def close() -> None:
            if entry is not None:
                entry[0].close()
            if fd is not None:
                loop.remove_reader(fd)
                os.close(fd)
                shutil.rmtree(os.path.dirname(path), ignore_errors=True)

        loop.call_soon_threadsafe(close)

    def stop_under(self, folder: str | Path) -> None:
        """Stop every socket served under `folder` (a sandbox's, when it ends)."""
        prefix = os.path.join(str(folder), "")
        for path in [path for path in list(self.servers) if path.startswith(prefix)]:
            self.stop(path)


PROXIES = ProxyLoop()
