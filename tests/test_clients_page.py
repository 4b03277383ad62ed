"""docs/clients.md's frames are the host's: every `jsonc` block of the page, played in order
against a real host, is answered as the page shows."""
import json
import re
import time
from typing import Any

import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from sessions_app.events import current_seq

from .conftest import ROOT

pytestmark = pytest.mark.e2e  # a daphne process

CLIENTS_PAGE = ROOT / "docs" / "clients.md"
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
LEFT_OUT = "…"  # the page's mark for a value it leaves out
TIMES = {"startedAt", "modifiedAt", "createdAt", "duration"}  # each run's own
FRAME_SECONDS = 20


def page_transcript(text: str) -> list[tuple[str, Any]]:
    """The page's frames in order: ("send", frame), ("receive", frame), or ("connect", None) where
    a block says a new connection begins."""
    steps: list[tuple[str, Any]] = []
    decoder = json.JSONDecoder()
    for block in re.findall(r"```jsonc\n(.*?)```", text, re.S):
        direction, body = "", ""
        for line in [*block.splitlines(), "// end"]:
            if not line.lstrip().startswith("//"):
                body += line + "\n"
                continue
            while body.strip():
                frame, end = decoder.raw_decode(body.strip())
                steps.append((direction, frame))
                body = body.strip()[end:]
            body = ""
            if "new connection" in line:
                steps.append(("connect", None))
            direction = "send" if "→" in line else "receive" if "←" in line else direction
    return steps


class HostIds:
    """The page's ids bound to this run's: one the client makes (a session, a turn) is its own, one
    the host makes (a chat, a tool call) is bound to what the host sent where the page first shows it."""

    def __init__(self) -> None:
        self.bound: dict[str, str] = {}

    def sent(self, value: Any) -> Any:
        if isinstance(value, dict):
            return {k: self.sent(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.sent(v) for v in value]
        if isinstance(value, str):
            for page_id in UUID.findall(value):
                self.bound.setdefault(page_id, page_id)
            return UUID.sub(lambda m: self.bound[m.group()], value)
        return value

    def matches(self, expected: Any, actual: Any, new: dict[str, str]) -> bool:
        """Whether `actual` is the page's `expected`, binding the page's unseen ids into `new`."""
        if expected == LEFT_OUT:
            return True
        if isinstance(expected, dict):
            return isinstance(actual, dict) and expected.keys() == actual.keys() and all(
                (key in TIMES and type(actual[key]) is type(expected[key])) or self.matches(expected[key], actual[key], new)
                for key in expected)
        if isinstance(expected, list):
            return isinstance(actual, list) and len(expected) == len(actual) and all(
                self.matches(e, a, new) for e, a in zip(expected, actual, strict=True))
        if isinstance(expected, str) and isinstance(actual, str):
            if UUID.split(expected) != UUID.split(actual):
                return False
            for page_id, run_id in zip(UUID.findall(expected), UUID.findall(actual), strict=True):
                known = self.bound.get(page_id, new.get(page_id))
                if known is None and run_id in (*self.bound.values(), *new.values()):
                    return False  # already the run's name for another of the page's ids
                if known is None:
                    new[page_id] = run_id
                elif known != run_id:
                    return False
            return True
        return type(expected) is type(actual) and expected == actual


class PageReader:
    """One connection at a time, as the page's reader opens them, with what it has not matched yet."""

    def __init__(self, port: int, token: str) -> None:
        self.url, self.token = f"ws://127.0.0.1:{port}/ahp?tkn={token}", token
        self.ws: Any = None
        self.unmatched: list[dict] = []
        self.ids = HostIds()

    def connect(self) -> None:
        self.close()
        self.ws, self.unmatched = connect(self.url).__enter__(), []

    def close(self) -> None:
        if self.ws is not None:
            self.ws.close()

    def send(self, frame: dict) -> None:
        self.ws.send(json.dumps(self.ids.sent(frame)))

    def receive(self, expected: dict) -> None:
        """The page's frame among those the host sent (in any order: channels interleave; frames the
        page leaves out are passed over), waiting for it if it has not come yet."""
        deadline = time.monotonic() + FRAME_SECONDS
        while True:
            for frame in self.unmatched:
                new: dict[str, str] = {}
                if self.ids.matches(expected, frame, new):
                    self.ids.bound.update(new)
                    self.unmatched.remove(frame)
                    return
            try:
                self.unmatched.append(json.loads(self.ws.recv(timeout=max(0.01, deadline - time.monotonic()))))
            except (TimeoutError, ConnectionClosed):
                pytest.fail(f"The host did not send the page's frame\n{json.dumps(expected)}\nbut only\n"
                            + "\n".join(json.dumps(f) for f in self.unmatched))


def wait_for_actions(tenant_id: int, newest: int) -> None:
    """Until the tenant's actions up to `newest` are done: what a `reconnect` on the page replays
    happened while the reader was away."""
    deadline = time.monotonic() + FRAME_SECONDS
    while current_seq(tenant_id) < newest and time.monotonic() < deadline:
        time.sleep(0.05)


def server_seqs(value: Any) -> list[int]:
    if isinstance(value, dict):
        return [n for k, v in value.items() for n in ([v] if k == "serverSeq" else server_seqs(v))]
    return [n for v in value for n in server_seqs(v)] if isinstance(value, list) else []


def test_every_frame_of_the_clients_page_is_what_the_host_answers(acme, live_server_process):
    steps = page_transcript(CLIENTS_PAGE.read_text())
    assert len([s for s in steps if s[0] == "send"]) > 20  # the page's blocks were found
    reader = PageReader(live_server_process, acme.tokens["member"])
    reader.connect()
    try:
        for i, (kind, frame) in enumerate(steps):
            if kind == "connect":
                reader.connect()
            elif kind == "send":
                if frame.get("method") == "reconnect":
                    wait_for_actions(acme.tenant.pk, max(server_seqs(steps[i + 1][1])))
                reader.send(frame)
            else:
                reader.receive(frame)
    finally:
        reader.close()
