"""`python -m ahp.front`: the host's serving tier when it has several serving processes (daphne,
as `ahp.serve` runs it): one listening socket in front of them; each connection is handed,
whole, to the process that serves its tenant.

Why: every socket on a process shares its event loop, so one tenant opening and closing
thousands of sockets stalled every other tenant's frames (bench.churn: the quiet tenant's p99
20x its baseline). Here all of a tenant's connections go to one process, and each tenant newly
seen goes to the process that serves the fewest tenants: a churning tenant costs its own
process's loop, not its neighbours'. Tenants outnumbering the processes share them.

How: the front reads a connection's request head and finds its tenant there: the token on any
request (`?tkn=` or `Authorization: Bearer`, its secret checked), else the session of an
`/ahp-mcp/<uuid>` path. It passes the socket and the bytes it read to that process over a Unix
socket (SCM_RIGHTS); the process adopts the socket as if it had accepted it, and the front is
out of the connection's path from then on. A request with no tenant (the admin, static files,
a token that does not check out) goes to the processes in turn: any of them serves anything.
They share the database; on Redis the channel layer too, and without it each hears the actions
the others logged from the action log, as it hears the Celery worker's (sessions_app/events/catch_up.py),
and a waiting agent is woken from its call's row (tools_app/runtime/waker.py). The front supervises its processes: a dead
one starts again (ahp/supervision.py), its tenants served by the others meanwhile.
"""
import argparse
import asyncio
import itertools
import os
import re
import signal
import socket
import subprocess
import sys
import time
import zlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import parse_qs, unquote, urlsplit

import django

from ahp.deployment import FRONT_PROCESSES, HANDOFF_BYTES, REQUEST_DEADLINE, refusal_to_start, secrets_key_refusal
from ahp.internals import refuse_to_start_if_moved
from ahp.supervision import Child, stop_children, supervise_once

# Route lookups the front remembers (token key ids, sessions); forgotten all at once past this.
REMEMBERED = 50_000
MCP_PATH = re.compile(r"^/ahp-mcp/([0-9a-fA-F-]{32,36})/?")


def request_head(data):
    """(target, headers) of the request head in `data`, or None until the head is complete."""
    end = data.find(b"\r\n\r\n")
    if end < 0:
        return None
    lines = data[:end].decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return (parts[1] if len(parts) == 3 else ""), headers


def route_of(data):
    """What names the tenant of the request in `data`: ("token", text), ("session", uuid) or None."""
    from grants.authentication import token_from_headers

    head = request_head(data)
    if head is None:
        return None
    target, headers = head
    url = urlsplit(target)
    token = parse_qs(url.query).get("tkn", [None])[0] or token_from_headers(headers.get("authorization"))
    if token:
        return "token", token
    mcp = MCP_PATH.match(unquote(url.path))
    return ("session", mcp.group(1)) if mcp else None


class Tenants:
    """The tenant a route names, read from the database once per token or session and kept."""

    def __init__(self):
        self.tokens = {}  # key id -> (secret_sha256, tenant id)
        self.sessions = {}  # session id -> tenant id
        # One thread, so the front holds one database connection whatever arrives at once.
        self.reader = ThreadPoolExecutor(1, thread_name_prefix="front-lookups")

    async def of(self, route):
        from grants.models import ApiToken

        kind, value = route
        loop = asyncio.get_running_loop()
        if kind == "session":
            if value not in self.sessions:
                self.remember(self.sessions, value, await loop.run_in_executor(self.reader, self.session_tenant, value))
            return self.sessions[value]
        parts = ApiToken.parts(value)
        if parts is None:
            return None
        key_id, secret = parts
        if key_id not in self.tokens:
            self.remember(self.tokens, key_id, await loop.run_in_executor(self.reader, self.token_tenant, key_id))
        found = self.tokens[key_id]
        return found[1] if found and ApiToken.secret_matches(found[0], secret) else None

    @staticmethod
    def remember(cache, key, value):
        if len(cache) >= REMEMBERED:
            cache.clear()
        cache[key] = value

    @staticmethod
    def token_tenant(key_id):
        from django.db import close_old_connections

        from grants.models import ApiToken

        close_old_connections()
        return ApiToken.objects.filter(key_id=key_id).values_list("secret_sha256", "tenant_id").first()

    @staticmethod
    def session_tenant(session_id):
        from django.core.exceptions import ValidationError
        from django.db import close_old_connections

        from sessions_app.models import Session

        close_old_connections()
        try:
            return Session.objects.filter(pk=session_id).values_list("tenant_id", flat=True).first()
        except ValidationError:
            return None


class ServingProcess(Child):
    """A serving process, started with its end of a Unix socket the front hands connections over;
    `ready` once it says it serves them (ahp.serve sends a byte when its server runs)."""

    handoff = None
    ready = False

    def __init__(self, name: str, argv: list[str], on_ready: Callable[[], None]) -> None:
        super().__init__(name, argv)
        self.on_ready = on_ready

    def start(self) -> None:
        front_end, process_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        front_end.setblocking(False)
        fd = process_end.fileno()
        # A process group of its own (as Child.start's): one still starting would print a
        # traceback for a Ctrl-C.
        self.process = subprocess.Popen([*self.argv, "--handoff-fd", str(fd)], pass_fds=[fd], process_group=0)
        self.started = time.monotonic()
        process_end.close()
        loop = asyncio.get_running_loop()
        if self.handoff is not None:
            loop.remove_reader(self.handoff.fileno())
            self.handoff.close()
        self.handoff, self.ready = front_end, False
        loop.add_reader(front_end.fileno(), self.heard)

    def heard(self) -> None:
        """Its one word: it serves (a byte), or it has gone (nothing)."""
        handoff = self.handoff
        if handoff is None:
            return
        asyncio.get_running_loop().remove_reader(handoff.fileno())
        try:
            self.ready = bool(handoff.recv(1))
        except OSError:
            self.ready = False
        if self.ready:
            self.on_ready()


class Front:
    def __init__(self, listener, processes, log):
        self.listener = listener
        self.processes = processes
        self.log = log
        self.tenants = Tenants()
        self.home = {}  # tenant id -> index of the process serving it
        self.turns = itertools.count()

    def running(self) -> list[int]:
        return [i for i, p in enumerate(self.processes) if p.running()]

    def serving(self, running: list[int]) -> list[int]:
        """Of `running`, those that serve; while none does (all starting again), all: a
        connection handed to one still importing the host waits there until it serves."""
        return [i for i in running if self.processes[i].ready] or running

    def process_for(self, tenant: int | None, failing: str | None = None) -> int | None:
        """The process for `tenant`'s connections; with none, for a token that does not check out
        (`failing`, its public prefix) always the same one, which counts its failures
        (ahp/protocol/throttle.py), and for anything else the next in turn."""
        running = self.running()
        if not running:
            return None
        serving = self.serving(running)
        if tenant is None:
            turn = zlib.crc32(failing.encode()) if failing is not None else next(self.turns)
            return serving[turn % len(serving)]
        home = self.home.get(tenant)
        if home is None:
            tenants_of = [list(self.home.values()).count(i) for i in range(len(self.processes))]
            home = self.home[tenant] = min(running, key=lambda i: tenants_of[i])
        # A tenant whose process is starting (again) is served by another meanwhile.
        return home if home in serving else serving[hash(tenant) % len(serving)]

    async def serve(self):
        loop = asyncio.get_running_loop()
        while True:
            connection, _ = await loop.sock_accept(self.listener)
            asyncio.create_task(self.hand_over(connection))

    async def hand_over(self, connection):
        from ahp.protocol.throttle import token_prefix

        loop = asyncio.get_running_loop()
        with connection:
            data = b""
            try:
                async with asyncio.timeout(REQUEST_DEADLINE):
                    while len(data) < HANDOFF_BYTES and request_head(data) is None:
                        more = await loop.sock_recv(connection, HANDOFF_BYTES - len(data))
                        if not more:
                            return
                        data += more
            except (TimeoutError, OSError):
                return  # as ahp.serve closes a request that does not arrive by its deadline
            route = route_of(data)
            tenant = None
            if route is not None:
                try:
                    tenant = await self.tenants.of(route)
                except Exception as exc:  # the database down: the serving process answers for it
                    self.log(f"The front could not read the tenant of a request ({exc.__class__.__name__}); "
                             "handing it to any serving process.")
            failing = token_prefix(route[1]) if tenant is None and route and route[0] == "token" else None
            await self.send(connection, data, tenant, failing)

    async def send(self, connection, data, tenant, failing=None):
        """Hand `connection` to its tenant's process, or another when that one cannot take it."""
        tried = set()
        while (index := self.process_for(tenant, failing)) is not None and index not in tried:
            try:
                socket.send_fds(self.processes[index].handoff, [data], [connection.fileno()])
                return
            except BlockingIOError:
                await asyncio.sleep(0.01)  # its queue of handovers is full: it is busy, not gone
            except OSError:
                tried.add(index)
                tenant = failing = None

    async def supervise(self):
        while True:
            supervise_once(self.processes, self.log)
            await asyncio.sleep(0.5)


def serving_processes(count: int, app: str, on_ready: Callable[[], None]) -> list[ServingProcess]:
    argv = [sys.executable, "-m", "ahp.serve", app]
    return [ServingProcess(f"serving process {i + 1}", argv, on_ready) for i in range(count)]


async def run(host: str, port: int, count: int, app: str) -> list[subprocess.Popen]:
    """Serve on `host:port` until SIGINT or SIGTERM; the processes still to stop."""
    # Signals first: a client (runhost's test) may send Ctrl-C as soon as the port answers.
    stopped, loop = asyncio.Event(), asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stopped.set)
    os.environ[FRONT_PROCESSES] = str(count)  # the serving processes' /healthz reports how many of them run
    all_ready = asyncio.Event()

    def said_ready() -> None:
        if all(p.ready for p in processes):
            all_ready.set()

    processes = serving_processes(count, app, said_ready)
    for process in processes:
        process.start()

    def log(line):
        print(line, file=sys.stderr, flush=True)

    front = Front(None, processes, log)
    tasks = [asyncio.create_task(front.supervise())]
    # The port opens once every process serves: a first request (runhost prints its token once
    # the port answers) is not left waiting while its tenant's process still imports the host.
    waits = [asyncio.create_task(all_ready.wait()), asyncio.create_task(stopped.wait())]
    await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    tasks += waits
    if not stopped.is_set():
        front.listener = socket.create_server((host, port), backlog=1024)
        front.listener.setblocking(False)
        log(f"Listening on TCP address {host}:{port}, in front of {count} serving processes")
        tasks.append(asyncio.create_task(front.serve()))
        await stopped.wait()
        front.listener.close()
    for task in tasks:
        task.cancel()
    return [p.process for p in processes if p.process is not None and p.running()]


def main(argv=None):
    refuse_to_start_if_moved()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ahp.settings")
    django.setup()
    from django.conf import settings

    parser = argparse.ArgumentParser(prog="python -m ahp.front", description=__doc__.split("\n\n")[0])
    parser.add_argument("-b", "--bind", default="127.0.0.1")
    parser.add_argument("-p", "--port", type=int, default=8000)
    parser.add_argument("--processes", type=int, default=settings.SERVING_PROCESSES,
                        help="serving processes (AHP_SERVING_PROCESSES; one per core)")
    parser.add_argument("application", nargs="?", default="ahp.asgi:application")
    args = parser.parse_args(argv)
    refusal = refusal_to_start([args.bind]) or secrets_key_refusal()
    if refusal:
        sys.exit(refusal)
    # Not asyncio.run: its own Ctrl-C handler cancels the task with a traceback.
    loop = asyncio.new_event_loop()
    try:
        running = loop.run_until_complete(run(args.bind, args.port, args.processes, args.application))
    except KeyboardInterrupt:  # before the handlers were in place; the processes end with the front
        running = []
    stop_children(running)


if __name__ == "__main__":
    main()
