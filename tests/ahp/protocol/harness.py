"""The production server (`ahp.serve`'s daphne) in this test process, so tests can register tools
and run sweeps in process, and a small synchronous AHP client over a real socket."""
import asyncio
import itertools
import json
import sys
import threading
import time
import uuid
from typing import Any

from websockets.sync.client import connect

INIT_VERSION = "1.1.0"  # the newest version the host speaks (ahp.protocol.methods.SUPPORTED_VERSIONS)


class ServerThread:
    """`ahp.serve` as production runs it (its command line, its patched daphne), on a thread of
    this process and a Twisted reactor of its own: each test's server starts on a fresh event
    loop, as a process does, and its loop's tasks end with it."""

    def __init__(self) -> None:
        from daphne.server import Server

        from ahp.serve import HostCommandLine

        test_server = self

        class InThreadServer(Server):
            def __init__(self, **options: Any) -> None:
                super().__init__(**options, signal_handlers=False)  # only the main thread may
                test_server.daphne = self

        class InThreadCommandLine(HostCommandLine):
            server_class = InThreadServer

        self.daphne: Server | None = None
        self.reactor: Any = None  # twisted's reactor, installed as the server starts
        self.command_line = InThreadCommandLine()
        self.thread = threading.Thread(target=self.serve, daemon=True, name="daphne")

    def serve(self) -> None:
        self.command_line.run(["-b", "127.0.0.1", "-p", "0", "-v", "0", "ahp.asgi:application"])
        # As asyncio.run ends a loop: what the server's applications left running is cancelled.
        loop = asyncio.get_event_loop()
        left = asyncio.all_tasks(loop)
        for task in left:
            task.cancel()
        loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))
        loop.close()

    def __enter__(self) -> "ServerThread":
        # A fresh channel layer and reactor for this server's event loop, as a production process
        # starts with (Twisted's reactor runs once; daphne's own test servers reinstall it too).
        import daphne.server
        import txaio
        from channels.layers import channel_layers
        from twisted.internet import asyncioreactor

        channel_layers.backends.clear()
        sys.modules.pop("twisted.internet.reactor", None)
        asyncioreactor.install(asyncio.new_event_loop())
        from twisted.internet import reactor

        daphne.server.reactor = self.reactor = reactor
        txaio.config.loop = reactor  # type: ignore[attr-defined]  # txaio sets `config` up at import
        self.thread.start()
        deadline = time.monotonic() + 20
        while not (self.daphne and self.daphne.listening_addresses):
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the test server did not start")
            time.sleep(0.02)
        [(_, self.port)] = self.daphne.listening_addresses
        return self

    def __exit__(self, *exc: object) -> None:
        from agents.warm import WARM
        from kernel import orm
        from tools_app.tool_threads import TOOL_THREADS

        # The harnesses its turns kept warm stop on its loop, before the loop ends.
        if WARM.loop is not None and WARM.loop.is_running():
            asyncio.run_coroutine_threadsafe(WARM.stop_all(), WARM.loop).result(60)
        self.reactor.callFromThread(lambda: asyncio.ensure_future(self.drop_connections()))
        self.thread.join(timeout=30)
        # As the process would have exited: the database work its sockets began has finished
        # (the test database is flushed next) and their connections are closed.
        orm.close_connections()
        TOOL_THREADS.close_connections()

    async def drop_connections(self) -> None:
        """Every client cut off, its application told and given its close timeout to end (its
        rows closed), then the reactor stopped."""
        server = self.daphne
        assert server is not None, "the server never started"
        instances = [details["application_instance"] for details in server.connections.values()
                     if "application_instance" in details]
        for protocol in list(server.connections):
            if protocol.transport is not None:
                protocol.transport.abortConnection()
        if instances:
            await asyncio.wait(instances, timeout=server.application_close_timeout)
        self.reactor.stop()


class RpcFailed(Exception):
    def __init__(self, error):
        super().__init__(f"{error['code']}: {error['message']}")
        self.code = error["code"]
        self.message = error["message"]
        self.data = error.get("data")


class AhpClient:
    """One connection: requests wait for their answer; notifications and the host's own requests
    are kept in arrival order."""

    def __init__(self, port, token, client_id="test-client", initialize=True, max_size=None):
        """`max_size`: the largest frame this client accepts (as a real client's library would)."""
        self._connection = connect(f"ws://127.0.0.1:{port}/ahp?tkn={token}", max_size=max_size)
        self.ws = self._connection.__enter__()
        self.client_id = client_id
        self.ids = itertools.count(1)
        self.client_seq = itertools.count(1)
        self.notifications = []
        self.init_result = None
        if initialize:
            self.init_result = self.call("initialize", {"channel": "ahp-root://", "protocolVersions": [INIT_VERSION],
                                                        "clientId": client_id})

    def close(self):
        self._connection.__exit__(None, None, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def send(self, payload):
        self.ws.send(payload if isinstance(payload, (str, bytes)) else json.dumps(payload))

    def read(self, timeout):
        frame = json.loads(self.ws.recv(timeout=timeout))
        if "method" in frame:
            self.notifications.append(frame)
        return frame

    def call(self, method, params=None, timeout=15):
        request_id = next(self.ids)
        self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params or {}})
        deadline = time.monotonic() + timeout
        while True:
            frame = self.read(max(0.01, deadline - time.monotonic()))
            if frame.get("id") == request_id and "method" not in frame:
                if "error" in frame:
                    raise RpcFailed(frame["error"])
                return frame["result"]

    def dispatch(self, channel, action):
        seq = next(self.client_seq)
        self.send({"jsonrpc": "2.0", "method": "dispatchAction",
                   "params": {"channel": channel, "clientSeq": seq, "action": action}})
        return seq

    def subscribe(self, channel):
        return self.call("subscribe", {"channel": channel})["snapshot"]["state"]

    def wait_for(self, predicate, timeout=15, describe="a notification"):
        """The first kept notification matching `predicate` (consumed), reading more as needed."""
        deadline = time.monotonic() + timeout
        while True:
            for i, frame in enumerate(self.notifications):
                if predicate(frame):
                    return self.notifications.pop(i)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"no {describe} within {timeout}s; got {self.notifications}")
            try:
                self.read(remaining)
            except TimeoutError:
                pass

    def action(self, action_type, timeout=15, rejected=False, **fields):
        """The next `action` envelope of `action_type` whose action has `fields`; a rejected one
        (carrying rejectionReason) only when `rejected`."""
        def matches(frame):
            if frame.get("method") != "action" or ("rejectionReason" in frame["params"]) != rejected:
                return False
            action = frame["params"]["action"]
            return action.get("type") == action_type and all(action.get(k) == v for k, v in fields.items())

        return self.wait_for(matches, timeout, f"{'rejected ' if rejected else ''}{action_type} {fields or ''}")["params"]

    def host_request(self, method, timeout=15):
        """The next request the host sent this client (a resourceRead), though it came while the
        test waited for something else."""
        return self.wait_for(lambda f: f.get("method") == method and "id" in f, timeout, f"{method} request")

    def notification(self, method, timeout=15):
        return self.wait_for(lambda f: f.get("method") == method, timeout, method)["params"]

    def create_session(self, provider="echo", **params):
        uri = f"ahp-session:/{uuid.uuid4()}"
        assert self.call("createSession", {"channel": uri, "provider": provider, **params}) is None
        return uri

    def start_turn(self, chat_uri, text):
        turn_id = str(uuid.uuid4())
        self.dispatch(chat_uri, {"type": "chat/turnStarted", "turnId": turn_id, "startedAt": "2026-11-29T00:00:00Z",
                                 "message": {"text": text, "origin": {"kind": "user"}}})
        return turn_id

    def reply_to(self, turn_id, timeout=20):
        """The agent's reply text for `turn_id` once the turn completes: its markdown part (not a
        notification the host put in the turn) and the deltas a streaming agent added to it."""
        def reply_part(frame):
            action = frame["params"]["action"] if frame.get("method") == "action" else {}
            return (action.get("type") == "chat/responsePart" and action.get("turnId") == turn_id
                    and action["part"].get("kind") == "markdown")

        part = self.wait_for(reply_part, timeout, f"chat/responsePart of turn {turn_id}")["params"]["action"]["part"]
        self.action("chat/turnComplete", timeout, turnId=turn_id)
        deltas = [f for f in self.notifications if f.get("method") == "action" and f["params"]["action"].get("type")
                  == "chat/delta" and f["params"]["action"].get("partId") == part["id"]]
        for frame in deltas:
            self.notifications.remove(frame)
        return part["content"] + "".join(f["params"]["action"]["content"] for f in deltas)


def default_chat(client, session_uri):
    return client.subscribe(session_uri)["defaultChat"]


def set_config(port, token, **config):
    """Change the tenant's HostConfig as its root would, over the socket."""
    with AhpClient(port, token, "operator") as operator:
        operator.subscribe("ahp-root://")
        operator.dispatch("ahp-root://", {"type": "root/configChanged", "config": config})
        return operator.action("root/configChanged")["action"]["config"]
