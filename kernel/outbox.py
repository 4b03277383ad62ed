"""Sends to the channel layer made for a database thread, so it never waits on the layer.

A `do_*` function's after-commit delivery runs on the thread that committed. When that thread
works for a serving event loop (an ORM hop of a socket or a turn in a process holding sockets),
the send is handed to that loop and the thread goes on at once; one task per loop and line
makes the sends in the order they were handed over. Any other thread (a Celery task, a
management command, a loop that ends with its work, whose pending sends would be dropped with
it) sends and waits.

A tenant's actions keep serverSeq order although several pool threads commit them: each takes
its place in the tenant's line when it is numbered (under the tenant's counter lock, so places
are taken in serverSeq order) and is sent once its change commits; a place whose change rolled
back is given up when its unit of work ends.
"""
import asyncio
import collections
import logging
import os
import threading
import weakref
from collections.abc import Awaitable, Callable
from typing import Protocol

from asgiref.sync import SyncToAsync, async_to_sync

logger = logging.getLogger(__name__)

Send = Callable[[], Awaitable[object]]  # a coroutine function making one send to the channel layer

_lines: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[object, Line]]" = weakref.WeakKeyDictionary()  # serving event loop -> {tenant id, or None: its Line}
_unit = threading.local()  # .places: the places this thread's unit of work took


class Line:
    """One serving loop's sends of one tenant (or of no tenant), in the order their places were
    taken. Places are taken on the committing threads and sent by one task on the loop, woken
    once per filled place."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.places: collections.deque[Place] = collections.deque()
        self.woken = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    def take_place(self) -> "Place":
        place = Place(self)
        self.places.append(place)
        return place

    def wake(self) -> None:  # on the loop
        if self.task is None:
            self.task = self.loop.create_task(self.drain())
        self.woken.set()

    async def drain(self) -> None:
        while True:
            while self.places and self.places[0].ready:
                place = self.places.popleft()
                if place.send is None:
                    continue  # its change rolled back
                try:
                    await place.send()
                except Exception as exc:
                    _log_failure(place.what, exc)
            self.woken.clear()
            await self.woken.wait()


class Place:
    """A send's place in its line, taken before the change it reports commits."""

    def __init__(self, line: Line) -> None:
        self.line = line
        self.ready = False
        self.what: str | None = None
        self.send: Send | None = None

    def fill(self, what: str, send: Send) -> None:
        self.what, self.send = what, send
        self._ready()

    def give_up(self) -> None:
        if not self.ready:
            self._ready()

    def _ready(self) -> None:
        self.ready = True
        self.line.loop.call_soon_threadsafe(self.line.wake)


class Fillable(Protocol):
    """Where a send goes once its change committed: a Place, or `_Unordered`."""

    def fill(self, what: str, send: Send) -> None: ...


class _Unordered:
    """What `place_in_line` answers where no line is kept: the send goes as `send_soon` sends."""

    @staticmethod
    def fill(what: str, send: Send) -> None:
        send_soon(what, send)


def serve_from(loop: asyncio.AbstractEventLoop) -> None:
    """`loop` runs as long as the process serves: sends for its threads may be handed to it."""
    _lines.setdefault(loop, {})


def place_in_line(tenant_id: object) -> Fillable:
    """Call inside the transaction that numbers the tenant's actions, after numbering them:
    answers where to `fill(what, send)` after commit."""
    loop = _serving_loop()
    places = getattr(_unit, "places", None)
    if loop is None or places is None:
        return _Unordered
    place = _line(loop, tenant_id).take_place()
    places.append(place)
    return place


def send_soon(what: str, send: Send) -> None:
    """Run the coroutine function `send` on the channel layer. The change it reports is
    committed, so a layer that is down (Redis restarting) must not turn it into an error for
    whoever made it: the failure is logged (and the host closes its sockets with 1012, clients
    catch up with `reconnect`; waiters read their rows)."""
    loop = _serving_loop()
    if loop is None:
        try:
            # On a loop of its own: the caller's (a test's, a cancelled caller's) may stop before
            # it ran what was handed to it, and this thread would wait for it for ever.
            async_to_sync(send, force_new_loop=True)()
        except Exception as exc:
            _log_failure(what, exc)
        return
    _line(loop, None).take_place().fill(what, send)


def unit_of_work_begins() -> None:
    _unit.places = []


def unit_of_work_ends() -> None:
    for place in _unit.places:
        place.give_up()
    _unit.places = None


def _serving_loop() -> asyncio.AbstractEventLoop | None:
    """The serving event loop this thread works for, or None."""
    local = SyncToAsync.threadlocal
    if getattr(local, "main_event_loop_pid", None) != os.getpid():
        return None
    loop = getattr(local, "main_event_loop", None)
    if loop is None or loop not in _lines or loop.is_closed():
        return None
    return loop


def _line(loop: asyncio.AbstractEventLoop, key: object) -> Line:
    lines = _lines[loop]
    line = lines.get(key)
    return line if line is not None else lines.setdefault(key, Line(loop))


def _log_failure(what: str | None, exc: Exception) -> None:
    logger.warning("Could not deliver %s through the channel layer (%s: %s); clients catch up by reconnect",
                   what, exc.__class__.__name__, exc)
