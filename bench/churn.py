"""Churn: one tenant opens and closes many sockets while another tenant's clients ping; the quiet
tenant's ping latency is measured first alone, then under the churn, in the same run.

The churning tenant opens `--churn` sockets at once (each `initialize`s), closes them all, and
starts again, for the churn phase's length. The quiet tenant's `--quiet` sockets each send
`ping` every 50 ms throughout. Target: the quiet tenant's p99 under churn within 2x of its p99
alone.

Run: `.venv/bin/python -m bench.churn` (embedded), or with DATABASE_URL and REDIS_URL set for
PostgreSQL + Redis (the database must be empty or migrated for the host). The host serves as
runhost does on two cores, through the front before two serving processes (`--processes 1`:
one daphne, the baseline before the front).

`--against floor` sends the churning sockets to a Channels consumer that only answers their
`initialize` (bench.echo_asgi's `/answer`, on a daphne of its own) while the quiet tenant pings
the host as before: what the same churn costs the quiet tenant when the host does none of the
churn's work. `--pace` caps the churn at that many sockets a second, so the two can be compared
at the host's own rate.
"""
import argparse
import asyncio
import base64
import contextlib
import itertools
import json
import multiprocessing
import os
import struct
import time
from urllib.parse import urlsplit

from websockets.asyncio.client import connect

from .servers import cpu_seconds, daphne, descendants, free_port, host_install, manage, serving

PING_EVERY = 0.05
OPENING_AT_ONCE = 100


def percentile(samples, p):
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p / 100))] * 1000 if ordered else float("nan")


async def opened(url, client_id):
    ws = await connect(url, max_size=None, open_timeout=60)
    await ws.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "channel": "ahp-root://", "protocolVersions": ["1.0.0"], "clientId": client_id}}))
    await ws.recv()
    return ws


async def pinger(ws, samples, stop, errors):
    ids = itertools.count(2)
    while not stop.is_set():
        started = time.monotonic()
        try:
            await ws.send(json.dumps({"jsonrpc": "2.0", "id": next(ids), "method": "ping",
                                      "params": {"channel": "ahp-root://"}}))
            while "result" not in json.loads(await ws.recv()):
                pass
        except Exception as exc:
            errors.append(f"ping: {exc.__class__.__name__}: {exc}")
            return
        samples.append(time.monotonic() - started)
        await asyncio.sleep(max(0.0, PING_EVERY - (time.monotonic() - started)))


class LeanSocket:
    """A churning client's socket, written by hand on asyncio's streams: the same handshake,
    `initialize`, answer and closing handshake as any client, at a fraction of the `websockets`
    library's CPU. The churning client shares the host's two cores, so what it spends there is
    taken from the host it loads; clients on other machines would take none."""

    def __init__(self, reader, writer):
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, url, client_id):
        parts = urlsplit(url)
        reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
        key = base64.b64encode(os.urandom(16)).decode()
        writer.write(f"GET {parts.path}?{parts.query} HTTP/1.1\r\nHost: {parts.netloc}\r\nUpgrade: websocket\r\n"
                     f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n".encode())
        head = await reader.readuntil(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.1 101"):
            writer.close()
            raise ConnectionError(head.split(b"\r\n", 1)[0].decode(errors="replace"))
        socket = cls(reader, writer)
        socket.send_frame(0x1, json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "channel": "ahp-root://", "protocolVersions": ["1.0.0"], "clientId": client_id}}).encode())
        opcode, payload = await socket.receive_frame()
        if opcode != 0x1 or b'"result"' not in payload:
            raise ConnectionError(f"initialize answered {payload[:200]!r}")
        return socket

    def send_frame(self, opcode, payload):
        """A final, masked frame, as a client must send (RFC 6455 5.3)."""
        mask, size = os.urandom(4), len(payload)
        if size < 126:
            length = bytes([0x80 | size])
        elif size < 65536:
            length = bytes([0x80 | 126]) + struct.pack("!H", size)
        else:
            length = bytes([0x80 | 127]) + struct.pack("!Q", size)
        # XOR with the repeated mask as one integer operation, not a Python loop per byte.
        repeated = (mask * (size // 4 + 1))[:size]
        masked = (int.from_bytes(payload, "big") ^ int.from_bytes(repeated, "big")).to_bytes(size, "big")
        self.writer.write(bytes([0x80 | opcode]) + length + mask + masked)

    async def receive_frame(self):
        first, second = await self.reader.readexactly(2)
        size = second & 0x7F
        if size == 126:
            size = struct.unpack("!H", await self.reader.readexactly(2))[0]
        elif size == 127:
            size = struct.unpack("!Q", await self.reader.readexactly(8))[0]
        return first & 0x0F, await self.reader.readexactly(size)

    async def close(self):
        """The closing handshake: our close frame (1000), the server's, then the TCP close."""
        self.send_frame(0x8, struct.pack("!H", 1000))
        try:
            while (await self.receive_frame())[0] != 0x8:
                pass
        except (asyncio.IncompleteReadError, ConnectionError):
            pass  # the server closed the TCP connection with its close frame
        self.writer.close()
        await self.writer.wait_closed()


async def churn(url, count, stop, counts, errors, lean=True, pace=0):
    limit = asyncio.Semaphore(OPENING_AT_ONCE)
    serial = itertools.count()
    opening = LeanSocket.open if lean else opened

    async def one():
        async with limit:
            return await asyncio.wait_for(opening(url, f"churn-{next(serial)}"), 60)

    while not stop.is_set():
        began = time.monotonic()
        sockets = []
        for result in await asyncio.gather(*(one() for _ in range(count)), return_exceptions=True):
            if isinstance(result, Exception):
                errors.append(f"open: {result.__class__.__name__}: {result}")
            else:
                sockets.append(result)
        counts["opened"] += len(sockets)
        await asyncio.gather(*(socket.close() for socket in sockets), return_exceptions=True)
        counts["closed"] += len(sockets)
        if pace:
            await asyncio.sleep(count / pace - (time.monotonic() - began))


def churning(url, count, nice, lean, pace, go, stop, outcome):
    """The churning tenant, in a process of its own: on the pingers' loop, its own handshakes
    would delay their pings as much as the server's do. Started before the quiet phase (starting
    a process holds up the loop that starts it) and let go at the churn phase. At `nice` above 0
    it takes only the CPU the host leaves, as clients on other machines would. It reports the
    CPU it used, the share of the machine the benchmark itself took from the host."""
    counts, errors = {"opened": 0, "closed": 0}, []
    os.nice(nice)
    go.wait()
    cpu = time.process_time()
    asyncio.run(churn(url, count, stop, counts, errors, lean, pace))
    counts["cpu"] = time.process_time() - cpu
    outcome.put((counts, errors))


def tier_cpu_seconds(pid):
    """CPU used so far by the serving tier: the process `pid` and every process below it."""
    return sum(cpu_seconds(p) for p in descendants(pid))


async def measure(quiet_url, churn_url, quiet, churn_count, seconds, tier_pid, nice=0, lean=True, pace=0):
    errors = []
    sockets = [await opened(quiet_url, f"quiet-{i}") for i in range(quiet)]
    phases, tier_cpu = {}, {}
    counts = {"opened": 0, "closed": 0}
    spawn = multiprocessing.get_context("spawn")
    go, churn_stop, outcome = spawn.Event(), spawn.Event(), spawn.Queue()
    churner = spawn.Process(target=churning, args=(churn_url, churn_count, nice, lean, pace, go, churn_stop, outcome))
    churner.start()
    for phase in ("quiet", "churn"):
        samples, stop = [], asyncio.Event()
        tasks = [asyncio.create_task(pinger(ws, samples, stop, errors)) for ws in sockets]
        if phase == "churn":
            go.set()
        cpu = tier_cpu_seconds(tier_pid)
        await asyncio.sleep(seconds)
        tier_cpu[phase] = tier_cpu_seconds(tier_pid) - cpu
        stop.set()
        await asyncio.wait_for(asyncio.gather(*tasks), 120)
        phases[phase] = samples
        if phase == "churn":
            churn_stop.set()
            counts, churn_errors = await asyncio.to_thread(outcome.get, timeout=120)
            errors += churn_errors
            churner.join()
    for ws in sockets:
        await ws.close()
    return phases, counts, tier_cpu, errors


def report(phases, counts, tier_cpu, errors, args):
    lines = [f"churn: {args.quiet} quiet sockets pinging every {PING_EVERY * 1000:g} ms; the other tenant opens and "
             f"closes {args.churn} sockets at a time; {args.seconds:g} s per phase; {args.processes} serving "
             f"process{'es' if args.processes > 1 else ''}; churning client: {args.churner}, at nice {args.churner_nice}, "
             f"against the {args.against}{f', at most {args.pace:g} a second' if args.pace else ''}"]
    for phase, samples in phases.items():
        lines.append(f"{phase:6} pings {len(samples):6}   p50 {percentile(samples, 50):8.2f} ms   "
                     f"p99 {percentile(samples, 99):8.2f} ms   max {max(samples, default=0) * 1000:8.2f} ms")
    ratio = percentile(phases["churn"], 99) / percentile(phases["quiet"], 99)
    lines.append(f"churned sockets: {counts['opened']} opened, {counts['closed']} closed; errors {len(errors)}")
    per_socket = (tier_cpu["churn"] - tier_cpu["quiet"]) / counts["opened"] if counts["opened"] else float("nan")
    lines.append(f"the serving tier's CPU: {100 * tier_cpu['quiet'] / args.seconds:.0f}% of a core alone, "
                 f"{100 * tier_cpu['churn'] / args.seconds:.0f}% under churn; "
                 f"{per_socket * 1e3:.2f} ms per socket opened and closed")
    lines.append(f"the churning client's own CPU: {100 * counts.get('cpu', 0) / args.seconds:.0f}% of a core "
                 "(taken from the host's two)")
    lines.append(f"quiet tenant's p99 under churn / alone: {ratio:.2f}x (target <= 2)")
    lines += [f"  error: {e}" for e in errors[:5]]
    return "\n".join(lines)


def parse(argv):
    parser = argparse.ArgumentParser(prog="python -m bench.churn", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quiet", type=int, default=10, help="sockets of the quiet tenant")
    parser.add_argument("--churn", type=int, default=500, help="sockets the churning tenant opens at a time")
    parser.add_argument("--seconds", type=float, default=20, help="length of each phase")
    parser.add_argument("--processes", type=int, default=2,
                        help="serving processes behind the front (1: one daphne, no front)")
    parser.add_argument("--churner-nice", type=int, default=0,
                        help="the churning client's niceness (10: it yields the cores to the host it loads)")
    parser.add_argument("--against", choices=("host", "floor"), default="host",
                        help="where the churning sockets go: the host, or a consumer that only answers them")
    parser.add_argument("--pace", type=float, default=0, help="the most sockets a second the churn opens (0: no limit)")
    parser.add_argument("--churner", choices=("lean", "websockets"), default="lean",
                        help="the churning client's sockets: hand-written (lean) or the websockets library's")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse(argv)
    with host_install() as (env, token):
        manage(env, "createtenant", "churner")
        manage(env, "addmember", "churner", "churning", "--role", "member")
        churn_token = manage(env, "minttoken", "churner", "churning")
        port = free_port()
        floor_port = free_port()
        with serving("ahp.asgi:application", env, port, args.processes) as server, \
                (daphne("bench.echo_asgi:application", env, floor_port) if args.against == "floor"
                 else contextlib.nullcontext()):
            url = f"ws://127.0.0.1:{port}/ahp?tkn="
            churn_url = f"ws://127.0.0.1:{floor_port}/answer?tkn=" if args.against == "floor" else url
            outcome = asyncio.run(measure(url + token, churn_url + churn_token, args.quiet, args.churn, args.seconds,
                                           server.pid, args.churner_nice, args.churner == "lean", args.pace))
    print(report(*outcome, args), flush=True)


if __name__ == "__main__":
    main()
