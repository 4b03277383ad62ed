"""Load: many clients across tenants, echo agents calling host tools and client tools, on
PostgreSQL and Redis, served as runhost serves them: one daphne, or the front before N serving
processes (ahp/front.py: each tenant's connections reach the process serving it); then the same
with more processes, and how the figures moved.

Each agent is two connections: a driver that owns the session and starts turns, and a tool
client that is the session's active client and answers its `ping`. A turn
is CALLS_PER_TURN lines `/call <tool> <json>`, alternating a cheap host tool (list_sessions,
get_current_session, list_artifacts_and_references) and the tool client's ping. The remaining
connections watch: each subscribes to one agent's chat and sends `listSessions` every few
seconds.

A call's latency is what the driver sees: from the previous event of the agent's loop (its
turn's dispatch, or the previous call's completion) to the call's `chat/toolCallComplete`. It
holds the catalog snapshot, the call's start, its run (for a client tool the round trip to the
tool client) and its completion, delivered through Redis.

Errors counted: every failed call, `chat/error`, JSON-RPC error answer, rejected action,
request or turn that timed out, and socket error or close this client did not ask for.

Messages the channel layer dropped, counted two ways. The layer's own word: the serving
processes' log lines where a layer message was lost (a send that failed, a receive loop that
lost Redis, channels_redis' list layer's "over capacity"). And what the clients got: every
action the log holds for an agent's chat must have reached its driver by the end (1 s after the
drain; the host's log catch-up, every 5 s, may have sent some of them late, which this does not
see).

The serving processes' CPU is what they (the front and its children) used during the window, per
tool call completed in it; the load client's own share of the machine is reported beside it (it
shares the cores).

The database (fresh, dropped after) is made on the server of DATABASE_URL, or on
postgres://postgres@127.0.0.1:5432; Redis is the db REDIS_URL names (redis://127.0.0.1:6379/15
without it), which must be empty, emptied after. No Celery worker runs: client-tool deadlines (10 min)
never fall due within a run.

Run: `.venv/bin/python -m bench.load` (a small configuration) or
`.venv/bin/python -m bench.load --connections 500 --tenants 10 --agents 200 --seconds 60 --workers 1,2`.
"""
import argparse
import asyncio
import contextlib
import itertools
import json
import os
import random
import resource
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from .servers import ROOT, descendants, free_port, host_install, serving, tree_rss_kib

DEFAULT_DATABASE = "postgres://postgres@127.0.0.1:5432/postgres"
DEFAULT_REDIS = "redis://127.0.0.1:6379/15"
REDIS_CLAIM_KEY = "ahp-bench-load-claim"
HOST_CALLS = ("list_sessions", "get_current_session", "list_artifacts_and_references")
PING = {"name": "ping", "description": "Answers pong.", "inputSchema": {"type": "object", "properties": {}}}
KINDS = ("host tool", "client tool", "listSessions (socket)")
# What a serving process logs when a channel layer message was lost.
LAYER_LOSSES = ("Could not deliver", "The channel layer's receive loop failed", "The channel layer failed",
                "over capacity")
REQUEST_TIMEOUT, TURN_TIMEOUT, OPENING_AT_ONCE = 60, 120, 50
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


# Where it runs ---------------------------------------------------------------------------------

@contextlib.contextmanager
def fresh_database(server_url):
    """A new, empty PostgreSQL database on `server_url`'s server; dropped afterwards."""
    import psycopg

    parts = urlsplit(server_url)
    if not parts.scheme.startswith("postgres"):
        raise SystemExit(f"bench.load needs PostgreSQL; DATABASE_URL is {parts.scheme}")
    name = f"ahp_load_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield urlunsplit(parts._replace(path=f"/{name}"))
    finally:
        with psycopg.connect(server_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextlib.contextmanager
def own_redis_db(url):
    """The Redis db `url` names, which must be empty (a run never shares one, nor empties one
    another run is using), claimed with a key; emptied afterwards."""
    import redis

    client = redis.Redis.from_url(url)
    if client.dbsize() != 0 or not client.set(REDIS_CLAIM_KEY, os.getpid(), nx=True):
        client.close()
        raise SystemExit(f"bench.load runs on an empty Redis db of its own; {url} holds keys "
                         "(name another db number in REDIS_URL)")
    try:
        yield url
    finally:
        client.flushdb()
        client.close()


@contextlib.contextmanager
def environment(**values):
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def seed_tenants(count):
    """In a child process on the install: tenants load-1..count-1, a member and a token each."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ahp.settings")
    import django

    django.setup()
    from django.contrib.auth import get_user_model

    from grants.actions import do_add_member, do_create_tenant, do_mint_token

    tokens = []
    for i in range(1, count):
        tenant = do_create_tenant(f"load-{i}")
        do_add_member(tenant, f"loader-{i}", "member")
        tokens.append(do_mint_token(tenant, get_user_model().objects.get(username=f"loader-{i}"), "load")[1])
    print(json.dumps(tokens))


def more_tokens(env, tenants):
    out = subprocess.run([sys.executable, "-c", f"from bench.load import seed_tenants; seed_tenants({tenants})"],
                         env=env, cwd=ROOT, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


# What the machine did --------------------------------------------------------------------------

def cpu_ticks():
    """CPU ticks used so far by every process: pid -> (ticks, name)."""
    used = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        name = cmdline or stat[stat.index("(") + 1:stat.rindex(")")]
        used[int(entry.name)] = (int(fields[11]) + int(fields[12]), name)
    return used


def machine_busy():
    """(busy, total) ticks of all cores so far."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = values[3] + values[4]
    return sum(values) - idle, sum(values)


class Usage:
    """CPU of each process and of the machine between `start` and `stop`."""

    def start(self):
        self.began, self.procs, self.machine = time.monotonic(), cpu_ticks(), machine_busy()
        self.client = resource.getrusage(resource.RUSAGE_SELF)

    def stop(self):
        self.elapsed = elapsed = time.monotonic() - self.began
        after, machine = cpu_ticks(), machine_busy()
        self.percent = {pid: (100 * (ticks - self.procs.get(pid, (0,))[0]) / CLOCK_TICKS / elapsed, name)
                        for pid, (ticks, name) in after.items()}
        busy, total = (b - a for a, b in zip(self.machine, machine))
        self.machine_percent = 100 * busy / total if total else 0
        client = resource.getrusage(resource.RUSAGE_SELF)
        self.client_percent = 100 * ((client.ru_utime - self.client.ru_utime) +
                                     (client.ru_stime - self.client.ru_stime)) / elapsed


# The clients -------------------------------------------------------------------------------------

class Stats:
    def __init__(self):
        self.latency = {kind: [] for kind in KINDS}
        self.errors = Counter()
        self.turn_seconds = []
        self.samples = []
        self.window = (float("inf"), float("inf"))

    def error(self, kind, detail):
        self.errors[kind] += 1
        if len(self.samples) < 8:
            self.samples.append(f"{kind}: {str(detail)[:160]}")

    def record(self, kind, seconds, at):
        if self.window[0] <= at <= self.window[1]:
            self.latency[kind].append(seconds)


class Connection:
    """One client socket: answers matched to requests, actions handed to `on_action`."""

    def __init__(self, ws, stats, on_action):
        self.ws, self.stats, self.on_action = ws, stats, on_action
        self.pending, self.ids, self.seqs = {}, itertools.count(1), itertools.count(1)
        self.closing = False
        self.reader = asyncio.create_task(self.read())

    @classmethod
    async def open(cls, url, client_id, stats, on_action=None):
        ws = await connect(url, max_size=None, open_timeout=REQUEST_TIMEOUT)
        connection = cls(ws, stats, on_action)
        await connection.call("initialize", {"channel": "ahp-root://", "protocolVersions": ["1.0.0"],
                                             "clientId": client_id})
        return connection

    async def read(self):
        try:
            async for raw in self.ws:
                frame = json.loads(raw)
                if "error" in frame:
                    self.stats.error("JSON-RPC error", frame["error"].get("message"))
                if "method" not in frame:
                    future = self.pending.pop(frame.get("id"), None)
                    if future is not None and not future.done():
                        future.set_result(frame)
                elif frame["method"] == "action":
                    envelope = frame["params"]
                    if "rejectionReason" in envelope:
                        self.stats.error("rejected action", envelope["rejectionReason"])
                    if self.on_action is not None:
                        await self.on_action(envelope)
        except ConnectionClosed as closed:
            if not self.closing:
                self.stats.error("socket error", f"closed: {closed}")
        except OSError as exc:
            self.stats.error("socket error", repr(exc))
        finally:
            for future in self.pending.values():
                if not future.done():
                    future.set_exception(ConnectionError("the socket closed"))

    async def call(self, method, params):
        request_id = next(self.ids)
        future = asyncio.get_running_loop().create_future()
        self.pending[request_id] = future
        await self.ws.send(json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}))
        try:
            frame = await asyncio.wait_for(future, REQUEST_TIMEOUT)
        except TimeoutError:
            self.pending.pop(request_id, None)
            self.stats.error("request timed out", method)
            return None
        return frame.get("result")

    async def dispatch(self, channel, action):
        await self.ws.send(json.dumps({"jsonrpc": "2.0", "method": "dispatchAction", "params": {
            "channel": channel, "clientSeq": next(self.seqs), "action": action}}))

    async def close(self):
        self.closing = True
        await self.ws.close()
        await self.reader


class Agent:
    """A session whose driver starts turns and whose tool client answers its ping calls."""

    def __init__(self, index, driver_url, tools_url, stats, calls_per_turn):
        self.index, self.stats = index, stats
        self.driver_url, self.tools_url = driver_url, tools_url
        self.client_id = f"tools{index}"
        lines = []
        for i in range(calls_per_turn):
            host = HOST_CALLS[(index + i // 2) % len(HOST_CALLS)]
            lines.append(f"/call {host} {{}}" if i % 2 == 0 else f"/call {self.client_id}__ping {{}}")
        self.text = "\n".join(lines)
        self.kinds, self.turn_id, self.turn_done, self.last_event = {}, None, None, 0.0
        self.heard = set()  # serverSeq of every action the driver got on its chat
        self.announced = asyncio.get_running_loop().create_future()
        self.session = f"ahp-session:/{uuid.uuid4()}"
        self.driver = self.tools = None

    async def open(self):
        self.driver = await Connection.open(self.driver_url, f"driver{self.index}", self.stats, self.on_driver_action)
        self.tools = await Connection.open(self.tools_url, self.client_id, self.stats, self.on_tool_action)
        await self.driver.call("createSession", {"channel": self.session, "provider": "echo"})
        snapshot = await self.driver.call("subscribe", {"channel": self.session})
        self.chat = snapshot["snapshot"]["state"]["defaultChat"]
        self.chat_from = (await self.driver.call("subscribe", {"channel": self.chat}))["snapshot"]["fromSeq"]
        await self.tools.call("subscribe", {"channel": self.session})
        await self.tools.call("subscribe", {"channel": self.chat})
        await self.tools.dispatch(self.session, {"type": "session/activeClientSet", "activeClient": {
            "clientId": self.client_id, "tools": [PING]}})
        await asyncio.wait_for(self.announced, REQUEST_TIMEOUT)

    async def on_tool_action(self, envelope):
        action = envelope["action"]
        if action["type"] == "session/activeClientSet" and (envelope.get("origin") or {}).get("clientId") == self.client_id:
            if not self.announced.done():
                self.announced.set_result(None)
        elif action["type"] == "chat/toolCallReady" and (action.get("contributor") or {}).get("clientId") == self.client_id:
            await self.tools.dispatch(self.chat, {
                "type": "chat/toolCallComplete", "turnId": action["turnId"], "toolCallId": action["toolCallId"],
                "result": {"success": True, "pastTenseMessage": "pinged", "content": [{"type": "text", "text": "pong"}]}})

    async def on_driver_action(self, envelope):
        action = envelope["action"]
        kind = action["type"]
        if envelope["channel"] == self.chat:
            self.heard.add(envelope["serverSeq"])
        if kind == "chat/toolCallStart":
            self.kinds[action["toolCallId"]] = "client tool" if action.get("contributor") else "host tool"
        elif kind == "chat/toolCallComplete":
            now = time.perf_counter()
            self.stats.record(self.kinds.pop(action["toolCallId"], "host tool"), now - self.last_event, time.monotonic())
            self.last_event = now
            if not action["result"].get("success"):
                self.stats.error("failed call", (action["result"].get("error") or {}).get("message"))
        elif kind in ("chat/turnComplete", "chat/error") and action.get("turnId") == self.turn_id:
            if kind == "chat/error":
                self.stats.error("chat/error", action.get("error"))
            if not self.turn_done.done():
                self.turn_done.set_result(None)

    async def run(self, deadline, patience=0):
        """Turns until `deadline`. A turn unfinished after TURN_TIMEOUT is an error; with
        `patience` seconds more the agent waits on, to tell a slow turn (it ends meanwhile) from
        a stuck one, and carries on after a slow one."""
        while time.monotonic() < deadline:
            self.turn_id = str(uuid.uuid4())
            self.turn_done = asyncio.get_running_loop().create_future()
            self.last_event = started = time.perf_counter()
            await self.driver.dispatch(self.chat, {
                "type": "chat/turnStarted", "turnId": self.turn_id, "startedAt": "2026-01-01T00:00:00.000Z",
                "message": {"text": self.text, "origin": {"kind": "user"}}})
            try:
                await asyncio.wait_for(asyncio.shield(self.turn_done), TURN_TIMEOUT)
            except TimeoutError:
                try:
                    await asyncio.wait_for(self.turn_done, patience)
                except TimeoutError:
                    self.stats.error("turn unfinished", f"{self.session} after {TURN_TIMEOUT + patience} s")
                    return
                self.stats.error("turn slow", f"{self.session} took {time.perf_counter() - started:.0f} s")
            self.stats.turn_seconds.append(time.perf_counter() - started)


async def watch(connection, chat, deadline, interval, stats):
    await connection.call("subscribe", {"channel": chat})
    await asyncio.sleep(random.uniform(0, interval))
    while time.monotonic() < deadline:
        started = time.perf_counter()
        result = await connection.call("listSessions", {"channel": "ahp-root://", "limit": 50})
        if result is not None:
            stats.record(KINDS[2], time.perf_counter() - started, time.monotonic())
        await asyncio.sleep(max(0.0, interval - (time.perf_counter() - started)))


async def opened(coroutines, stats):
    """Run the openings a bounded number at a time; a failed opening is an error, not a crash."""
    gate = asyncio.Semaphore(OPENING_AT_ONCE)

    async def one(coroutine):
        async with gate:
            try:
                return await coroutine
            except (OSError, ConnectionClosed, TimeoutError, TypeError) as exc:
                stats.error("socket error", f"while opening: {exc!r}")
                return None

    return await asyncio.gather(*(one(c) for c in coroutines))


async def drive(urls, tenants, agents, connections, seconds, calls_per_turn, watch_interval, server):
    """Open everything, run for `seconds`, let turns in flight finish, close everything."""
    stats = Stats()
    setup_started = time.monotonic()
    # Agent i is on tenant i % tenants.
    crew = [Agent(i, urls[i % tenants], urls[i % tenants], stats, calls_per_turn) for i in range(agents)]
    await opened((a.open() for a in crew), stats)
    ready = [a for a in crew if a.announced.done()]
    watchers = []
    for i in range(max(0, connections - 2 * agents)):
        watchers.append(Connection.open(urls[i % tenants], f"watcher{i}", stats))
    watchers = [w for w in await opened(watchers, stats) if w is not None]
    setup = time.monotonic() - setup_started
    rss_start = tree_rss_kib(server.pid)
    usage = Usage()
    usage.start()
    start = time.monotonic()
    deadline = start + seconds
    stats.window = (start, deadline)
    peak = rss_start

    async def sample_memory():
        nonlocal peak
        while time.monotonic() < deadline:
            await asyncio.sleep(min(1.0, max(0.0, deadline - time.monotonic())))
            peak = max(peak, tree_rss_kib(server.pid))
        usage.stop()  # CPU of the window alone, as the calls counted are the window's

    tenant_chats = [[a.chat for a in ready if a.index % tenants == t] or [None] for t in range(tenants)]
    jobs = [a.run(deadline) for a in ready] + [
        watch(w, tenant_chats[i % tenants][i % len(tenant_chats[i % tenants])], deadline, watch_interval, stats)
        for i, w in enumerate(watchers) if tenant_chats[i % tenants][0]]
    await asyncio.gather(sample_memory(), *jobs)
    drained = time.monotonic() - deadline
    await asyncio.sleep(1)  # the last actions of the last turns
    rss_end = tree_rss_kib(server.pid)
    open_sockets = [c for a in crew for c in (a.driver, a.tools) if c is not None] + watchers
    if len(open_sockets) < connections:
        stats.error("socket error", f"only {len(open_sockets)} of {connections} connections opened")
    for connection in open_sockets:
        await connection.close()
    return {"stats": stats, "setup": setup, "drained": drained, "usage": usage, "sockets": len(open_sockets),
            "rss": (rss_start, peak, rss_end), "seconds": seconds, "agents": ready}


# Running and reporting ---------------------------------------------------------------------------

def percentile(samples, p):
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p))] if ordered else float("nan")


def run_once(args, worker_count, database_base, redis_base):
    with fresh_database(database_base) as database_url, own_redis_db(redis_base) as redis_url, \
            environment(DATABASE_URL=database_url, REDIS_URL=redis_url), host_install() as (env, token):
        tokens = [token] + more_tokens(env, args.tenants)
        log = Path(env["AHP_VAR_DIR"]) / "serving.log"
        port = free_port()
        with serving("ahp.asgi:application", env, port, worker_count, log) as server:
            urls = [f"ws://127.0.0.1:{port}/ahp?tkn={t}" for t in tokens]
            outcome = asyncio.run(drive(urls, args.tenants, args.agents, args.connections, args.seconds,
                                        args.calls_per_turn, args.watch_interval, server))
            outcome["worker_pids"] = descendants(server.pid)
        outcome["layer_losses"] = layer_losses([log])
        outcome["missed"] = missed_actions(database_url, outcome.pop("agents"))
    outcome["workers"] = worker_count
    return outcome


def layer_losses(logs):
    """Lines of the serving processes' logs that tell of a channel layer message lost."""
    return sum(1 for log in logs for line in log.read_text(errors="replace").splitlines()
               if any(loss in line for loss in LAYER_LOSSES))


def missed_actions(database_url, agents):
    """(missed, logged): of the actions the log holds for the agents' chats since each driver
    subscribed, how many their drivers never got."""
    import psycopg

    by_chat = {a.chat: a for a in agents}
    missed = logged = 0
    with psycopg.connect(database_url) as db:
        rows = db.execute("SELECT channel, seq FROM sessions_app_actionlog WHERE channel = ANY(%s)",
                          (list(by_chat),)).fetchall()
    for channel, seq in rows:
        agent = by_chat[channel]
        if seq > agent.chat_from:
            logged += 1
            missed += seq not in agent.heard
    return missed, logged


def report(outcome, args):
    stats, usage = outcome["stats"], outcome["usage"]
    print(f"-- {serving_processes(outcome['workers'])}: {outcome['sockets']} connections, {args.tenants} tenants, "
          f"{args.agents} agents, {args.seconds} s on PostgreSQL + Redis")
    print(f"setup {outcome['setup']:.1f} s; turns in flight drained in {outcome['drained']:.1f} s after the window")
    print(f"{'kind':<24} {'calls':>7} {'per s':>8} {'p50 ms':>9} {'p99 ms':>9}")
    for kind in KINDS:
        samples = stats.latency[kind]
        print(f"{kind:<24} {len(samples):>7} {len(samples) / args.seconds:>8.1f} "
              f"{percentile(samples, 0.5) * 1e3:>9.1f} {percentile(samples, 0.99) * 1e3:>9.1f}")
    tool_calls = len(stats.latency["host tool"]) + len(stats.latency["client tool"])
    print(f"tool calls per second: {tool_calls / args.seconds:.1f}")
    print(f"serving processes' CPU per tool call: {server_cpu_per_call(outcome) * 1e3:.1f} ms "
          f"(during the window; target <= 4)")
    detail = ", ".join(f"{k} {v}" for k, v in sorted(stats.errors.items())) or "none"
    print(f"errors: {sum(stats.errors.values())} ({detail})")
    print(f"channel layer: {outcome['layer_losses']} losses in the serving processes' logs; "
          f"{outcome['missed'][0]} of the {outcome['missed'][1]} logged actions of the agents' chats never reached "
          "their drivers")
    for sample in stats.samples:
        print(f"   e.g. {sample}")
    start, peak, end = outcome["rss"]
    cpu = ", ".join(f"{usage.percent.get(pid, (0, ''))[0]:.0f}%" for pid in outcome["worker_pids"])
    print(f"serving processes' RSS MiB: start {start / 1024:.0f}, peak {peak / 1024:.0f}, end {end / 1024:.0f}; "
          f"CPU {cpu} of a core (the front first)")
    print(f"load client CPU {usage.client_percent:.0f}% of a core; machine {usage.machine_percent:.0f}% busy "
          f"({os.cpu_count()} cores)")
    mine = set(outcome["worker_pids"]) | {os.getpid()}
    others = sorted(((pct, name) for pid, (pct, name) in usage.percent.items() if pid not in mine and pct >= 2),
                    reverse=True)[:6]
    print("busiest other processes: " + "; ".join(f"{pct:.0f}% {name[:70]}" for pct, name in others))


def serving_processes(count):
    return "one daphne" if count == 1 else f"the front before {count} serving processes"


def server_cpu_per_call(outcome):
    """CPU seconds the workers used while measured, per tool call measured."""
    usage, lat = outcome["usage"], outcome["stats"].latency
    seconds = sum(usage.percent.get(pid, (0,))[0] for pid in outcome["worker_pids"]) / 100 * usage.elapsed
    return seconds / max(1, len(lat["host tool"]) + len(lat["client tool"]))


def summary(outcomes, args):
    print("-- from one serving process to more")
    print(f"{'workers':>7} {'calls/s':>8} {'per worker':>10} {'host p50/p99 ms':>17} {'client p50/p99 ms':>19} "
          f"{'list p50/p99 ms':>17} {'errors':>6} {'dropped':>7} {'RSS peak MiB':>14} {'CPU/call ms':>12} "
          f"{'client CPU':>10}")
    for o in outcomes:
        lat = o["stats"].latency
        per_s = (len(lat["host tool"]) + len(lat["client tool"])) / args.seconds

        def pair(kind):
            return f"{percentile(lat[kind], 0.5) * 1e3:.0f}/{percentile(lat[kind], 0.99) * 1e3:.0f}"

        print(f"{o['workers']:>7} {per_s:>8.1f} {per_s / o['workers']:>10.1f} {pair('host tool'):>17} "
              f"{pair('client tool'):>19} {pair(KINDS[2]):>17} {sum(o['stats'].errors.values()):>6} "
              f"{o['layer_losses'] + o['missed'][0]:>7} {o['rss'][1] / 1024:>14.0f} "
              f"{server_cpu_per_call(o) * 1e3:>12.1f} {o['usage'].client_percent:>9.0f}%")


def parse(argv):
    parser = argparse.ArgumentParser(prog="python -m bench.load", description=__doc__.split("\n\n")[0])
    parser.add_argument("--connections", type=int, default=60)
    parser.add_argument("--tenants", type=int, default=3)
    parser.add_argument("--agents", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--workers", default="1,2",
                        help="serving process counts to run, e.g. 1,2 (1: one daphne; more: the front before them)")
    parser.add_argument("--calls-per-turn", type=int, default=6)
    parser.add_argument("--watch-interval", type=float, default=10.0, help="seconds between a watcher's listSessions")
    args = parser.parse_args(argv)
    if args.connections < 2 * args.agents:
        parser.error("each agent takes two connections: --connections must be at least 2 x --agents")
    args.workers = [int(w) for w in args.workers.split(",")]
    return args


def main(argv=()):
    args = parse(list(argv))
    database_base = os.environ.get("DATABASE_URL") or DEFAULT_DATABASE
    redis_base = os.environ.get("REDIS_URL") or DEFAULT_REDIS
    outcomes = []
    for count in args.workers:
        outcomes.append(run_once(args, count, database_base, redis_base))
        report(outcomes[-1], args)
    if len(outcomes) > 1:
        summary(outcomes, args)


if __name__ == "__main__":
    main(sys.argv[1:])
