"""Client-tool round trip over real sockets: the echo agent calls a client's tool, the client sees
`chat/toolCallReady`, completes it, the agent has the result and makes the next call; a
`fetchTurns` page of 50 turns; a terminal echo (a keystroke through the PTY in the session's
sandbox and back as terminal/data). Each compared in the same run with a minimal Channels JSON
echo on the same server (the framework floor) and a bare `websockets` echo; then the host's
memory per idle connection at 1000 connections.

Run: `.venv/bin/python -m bench.ws_roundtrip` (embedded), or with DATABASE_URL and REDIS_URL set
(an empty database). Targets: embedded p50 within 3x the Channels echo floor; on PostgreSQL +
Redis within 2x the durable floor (the echo after two transactions and two layer hops); at most
4 ms of the serving process's CPU per call on both.
"""
import asyncio
import json
import os
import sys
import time
import uuid

from websockets.asyncio.client import connect

from .servers import cpu_seconds, daphne, free_port, host_install, rss_kib, running

CALLS = 1000
ECHOES = 2000
PAGE_TURNS = 50
PAGES = 200
KEYSTROKES = 300
DURABLE_ECHOES = 500
IDLE_CONNECTIONS = 1000


def percentile(samples, p):
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p))]


async def echo_floor(url, echoes=ECHOES):
    async with connect(url, max_size=None) as ws:
        samples = []
        for i in range(echoes):
            start = time.perf_counter()
            await ws.send(json.dumps({"jsonrpc": "2.0", "id": i, "method": "ping", "params": {}}))
            await ws.recv()
            samples.append(time.perf_counter() - start)
        return samples


class Client:
    def __init__(self, ws, client_id):
        self.ws = ws
        self.client_id = client_id
        self.next_id = 0
        self.client_seq = 0

    @classmethod
    async def open(cls, url, client_id):
        ws = await connect(url, max_size=None)
        client = cls(ws, client_id)
        await client.call("initialize", {"channel": "ahp-root://", "protocolVersions": ["1.0.0"], "clientId": client_id})
        return client

    async def call(self, method, params):
        self.next_id += 1
        await self.ws.send(json.dumps({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}))
        while True:
            frame = json.loads(await self.ws.recv())
            if frame.get("id") == self.next_id:
                if "error" in frame:  # e.g. createTerminal on a host without bubblewrap: stop, don't wait for ever
                    raise RuntimeError(f"{method} failed: {frame['error']['message']}")
                return frame.get("result")

    async def dispatch(self, channel, action):
        self.client_seq += 1
        await self.ws.send(json.dumps({"jsonrpc": "2.0", "method": "dispatchAction",
                                       "params": {"channel": channel, "clientSeq": self.client_seq, "action": action}}))


async def client_tool_round_trips(url):
    agent_side = await Client.open(url, "driver")
    ide = await Client.open(url, "ide")
    session = f"ahp-session:/{uuid.uuid4()}"
    await agent_side.call("createSession", {"channel": session, "provider": "echo"})
    state = await ide.call("subscribe", {"channel": session})
    chat = state["snapshot"]["state"]["defaultChat"]
    await ide.call("subscribe", {"channel": chat})
    await ide.dispatch(session, {"type": "session/activeClientSet", "activeClient": {
        "clientId": "ide", "tools": [{"name": "ping", "inputSchema": {"type": "object"}}]}})
    turn = str(uuid.uuid4())
    text = "\n".join("/call ide__ping {}" for _ in range(CALLS))
    await agent_side.dispatch(chat, {"type": "chat/turnStarted", "turnId": turn, "startedAt": "2026-01-01T00:00:00Z",
                                     "message": {"text": text, "origin": {"kind": "user"}}})
    samples, started, last_ready = [], time.perf_counter(), None
    while True:
        frame = json.loads(await ide.ws.recv())
        action = frame.get("params", {}).get("action", {}) if frame.get("method") == "action" else {}
        if action.get("type") == "chat/toolCallReady":
            now = time.perf_counter()
            if last_ready is not None:
                samples.append(now - last_ready)
            last_ready = now
            await ide.dispatch(chat, {"type": "chat/toolCallComplete", "turnId": turn, "toolCallId": action["toolCallId"],
                                      "result": {"success": True, "pastTenseMessage": "pinged",
                                                 "content": [{"type": "text", "text": "pong"}]}})
        elif action.get("type") in ("chat/turnComplete", "chat/error"):
            break
    total = time.perf_counter() - started
    await agent_side.ws.close()
    await ide.ws.close()
    return samples, CALLS / total


async def fetch_turn_pages(url):
    """The time to fetch a page of PAGE_TURNS turns, once the chat has them."""
    client = await Client.open(url, "history")
    session = f"ahp-session:/{uuid.uuid4()}"
    await client.call("createSession", {"channel": session, "provider": "echo"})
    chat = (await client.call("subscribe", {"channel": session}))["snapshot"]["state"]["defaultChat"]
    await client.call("subscribe", {"channel": chat})
    for i in range(PAGE_TURNS):
        turn = str(uuid.uuid4())
        await client.dispatch(chat, {"type": "chat/turnStarted", "turnId": turn, "message": {"text": f"turn {i}"}})
        while True:
            frame = json.loads(await client.ws.recv())
            action = frame.get("params", {}).get("action", {}) if frame.get("method") == "action" else {}
            if action.get("type") == "chat/turnComplete" and action.get("turnId") == turn:
                break
    samples = []
    for _ in range(PAGES):
        start = time.perf_counter()
        page = await client.call("fetchTurns", {"channel": chat, "limit": PAGE_TURNS})
        samples.append(time.perf_counter() - start)
    assert len(page["turns"]) == PAGE_TURNS, page
    await client.ws.close()
    return samples


async def terminal_echoes(url, folder):
    """A keystroke's trip: terminal/input to the PTY, `cat` in the sandbox, terminal/data back."""
    client = await Client.open(url, "terminal")
    session = f"ahp-session:/{uuid.uuid4()}"
    await client.call("createSession", {"channel": session, "provider": "echo", "workingDirectories": [folder]})
    terminal = f"ahp-terminal:/{uuid.uuid4()}"
    await client.call("createTerminal", {"channel": terminal, "session": session})
    await client.call("subscribe", {"channel": terminal})

    async def until(needle):
        seen = ""
        while needle not in seen:
            frame = json.loads(await client.ws.recv())
            action = frame.get("params", {}).get("action", {}) if frame.get("method") == "action" else {}
            if action.get("type") == "terminal/data":
                seen += action["data"]

    await client.dispatch(terminal, {"type": "terminal/input", "data": "stty -echo; cat\n"})
    await asyncio.sleep(1)
    samples = []
    for i in range(KEYSTROKES):
        start = time.perf_counter()
        await client.dispatch(terminal, {"type": "terminal/input", "data": f"k{i}\n"})
        await until(f"k{i}")
        samples.append(time.perf_counter() - start)
    await client.ws.close()
    return samples


async def idle_memory(url, pid):
    before = rss_kib(pid)
    clients = []
    for i in range(IDLE_CONNECTIONS):
        clients.append(await Client.open(url, f"idle-{i}"))
    await asyncio.sleep(1)
    after = rss_kib(pid)
    for client in clients:
        await client.ws.close()
    return (after - before) / IDLE_CONNECTIONS


def report(name, samples):
    print(f"{name:<28} p50 {percentile(samples, 0.5) * 1e3:8.2f} ms   p99 {percentile(samples, 0.99) * 1e3:8.2f} ms")
    return percentile(samples, 0.5)


def main():
    with host_install() as (env, token):
        port = free_port()
        with daphne("ahp.asgi:application", env, port) as server:
            url = f"ws://127.0.0.1:{port}/ahp?tkn={token}"
            asyncio.run(client_tool_round_trips(url))  # a warm-up turn: a host serving calls is warm
            cpu_before = cpu_seconds(server.pid)
            round_trips, per_second = asyncio.run(client_tool_round_trips(url))
            cpu_per_call = (cpu_seconds(server.pid) - cpu_before) / CALLS
            pages = asyncio.run(fetch_turn_pages(url))
            folder = os.path.join(env["AHP_VAR_DIR"], "workspaces", "bench", "project")
            os.makedirs(folder)
            keystrokes = asyncio.run(terminal_echoes(url, f"file://{folder}"))
            memory = asyncio.run(idle_memory(url, server.pid))
        echo_port = free_port()
        with daphne("bench.echo_asgi:application", env, echo_port):
            channels_floor = asyncio.run(echo_floor(f"ws://127.0.0.1:{echo_port}/echo"))
            durable_floor = asyncio.run(echo_floor(f"ws://127.0.0.1:{echo_port}/durable", DURABLE_ECHOES))
        bare_port = free_port()
        with running([sys.executable, "-m", "bench.echo_asgi", str(bare_port)], env, bare_port):
            bare_floor = asyncio.run(echo_floor(f"ws://127.0.0.1:{bare_port}/"))
    host_p50 = report("client-tool round trip", round_trips)
    page_p50 = report(f"fetchTurns page of {PAGE_TURNS}", pages)
    keystroke_p50 = report("terminal echo round trip", keystrokes)
    channels_p50 = report("Channels JSON echo (floor)", channels_floor)
    durable_p50 = report("durable floor", durable_floor)
    bare_p50 = report("bare websockets echo", bare_floor)
    print(f"client-tool calls per second: {per_second:.1f}")
    print(f"serving-process CPU per call (after a warm-up turn; its session's set-up included): "
          f"{cpu_per_call * 1e3:.1f} ms   (target <= 4)")
    print(f"round trip p50 / Channels echo p50: {host_p50 / channels_p50:.2f}   (target <= 3)")
    print(f"fetchTurns page p50 / Channels echo p50: {page_p50 / channels_p50:.2f}")
    print(f"terminal echo p50 / Channels echo p50: {keystroke_p50 / channels_p50:.2f}")
    print(f"round trip p50 / durable floor p50: {host_p50 / durable_p50:.2f}   (target <= 2 on PostgreSQL + Redis)")
    print(f"Channels echo p50 / bare echo p50: {channels_p50 / bare_p50:.2f}")
    print(f"memory per idle connection at {IDLE_CONNECTIONS}: {memory:.1f} KiB")


if __name__ == "__main__":
    main()
