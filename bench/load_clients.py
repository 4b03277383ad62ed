"""The load's clients: a socket matching answers to requests, an agent (a driver starting turns and
a tool client answering its ping), a watcher listing sessions, and the figures they record."""
import asyncio
import itertools
import json
import random
import time
import uuid
from collections import Counter

from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

HOST_CALLS = ("list_sessions", "get_current_session", "list_artifacts_and_references")
PING = {"name": "ping", "description": "Answers pong.", "inputSchema": {"type": "object", "properties": {}}}
KINDS = ("host tool", "client tool", "listSessions (socket)")
REQUEST_TIMEOUT, TURN_TIMEOUT, OPENING_AT_ONCE = 60, 120, 50


def percentile(samples, p):
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p))] if ordered else float("nan")


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
                await self.take(json.loads(raw))
        except ConnectionClosed as closed:
            if not self.closing:
                self.stats.error("socket error", f"closed: {closed}")
        except OSError as exc:
            self.stats.error("socket error", repr(exc))
        finally:
            for future in self.pending.values():
                if not future.done():
                    future.set_exception(ConnectionError("the socket closed"))

    async def take(self, frame):
        """An answer settles its request; an action goes to `on_action`; errors are counted."""
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
