"""ORM work from async code: `database_sync_to_async`, on a pool of threads rather than the one
thread asgiref shares between every socket and every agent of a process.

Each pool thread keeps one database connection (settings.AHP_ORM_THREADS threads, so as many
connections per serving process), checked at the start and end of every unit of work as
Channels does: one that failed or outlived CONN_MAX_AGE is closed and the next hop reconnects.
Work awaited from under a synchronous caller (a test body, a Celery task, a management command
going through `async_to_sync`) runs on that caller's thread, as Channels' own would: the caller
may hold a transaction the work must see. With one thread (SQLite's default) the work stays on
asgiref's shared thread, where the hops not yet moved here (agents/, tools_app/families/) run:
two SQLite writers on two threads would only wait on each other's lock.
"""
import asyncio
import contextvars
import functools
import os
import sys
import threading
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Generic, ParamSpec, TypeVar

from asgiref.sync import AsyncToSync, SyncToAsync
from channels.db import DatabaseSyncToAsync
from django.conf import settings
from django.db import DatabaseError, InterfaceError, OperationalError, close_old_connections, connections

from . import outbox

P = ParamSpec("P")
R = TypeVar("R")

SHARED_THREAD = settings.AHP_ORM_THREADS == 1
POOL = ThreadPoolExecutor(max_workers=settings.AHP_ORM_THREADS, thread_name_prefix="orm")
_outages = [0]  # how many units found the database gone: a thread that saw fewer reconnects
_thread = threading.local()  # .outages: the count when this thread last connected


class database_sync_to_async(Generic[P, R]):  # noqa: N801 (used as a decorator, as Channels' is)
    """`func` as a coroutine function whose calls each run as one unit of work on a pool thread.

    The hop is asyncio's own `run_in_executor`, in a copy of the caller's context, rather than
    asgiref's SyncToAsync, which costs a third more CPU a hop (about 40 us here, and agents and
    sockets make several hops a tool call): the ORM's work needs no more of it than the thread's
    note of the serving loop (kernel.outbox, async_to_sync within the work) and its behaviour when
    the caller is cancelled (at once, as there: work not yet started never runs, work already
    running finishes on its thread)."""

    def __init__(self, func: Callable[P, R]) -> None:
        self.func = func
        functools.update_wrapper(self, func)

    async def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        if SHARED_THREAD or getattr(AsyncToSync.executors, "current", None) is not None:
            return await DatabaseSyncToAsync(self.func)(*args, **kwargs)
        loop = asyncio.get_running_loop()
        work = functools.partial(self.func, *args, **kwargs)
        return await loop.run_in_executor(POOL, contextvars.copy_context().run, unit_of_work, loop, work)


def works_for(loop: asyncio.AbstractEventLoop) -> None:
    """This thread's work is for `loop`: asgiref's async_to_sync within it, and kernel.outbox's
    sends after its commits, go to that loop."""
    SyncToAsync.threadlocal.main_event_loop = loop
    SyncToAsync.threadlocal.main_event_loop_pid = os.getpid()


def unit_of_work(loop: asyncio.AbstractEventLoop, work: Callable[[], R]) -> R:
    works_for(loop)
    outbox.unit_of_work_begins()
    try:
        return with_checked_connections(work)
    finally:
        outbox.unit_of_work_ends()


def with_checked_connections(work: Callable[..., R], *args: Any, **kwargs: Any) -> R:
    """`work(*args, **kwargs)` with this thread's connections checked before and after, as every
    unit of work's are: one that failed or outlived CONN_MAX_AGE is closed, and once any thread
    found the database gone, every thread reconnects before its next work. Sync work run off the
    pool (a host tool's body) goes through here too, or a thread's connection that died with the
    database would fail every call that thread runs after it is back."""
    if getattr(_thread, "outages", 0) != _outages[0]:
        _thread.outages = _outages[0]
        close_connections_of_this_thread()
    close_old_connections()
    try:
        return work(*args, **kwargs)
    except (OperationalError, InterfaceError):
        _outages[0] += 1
        raise
    finally:
        close_old_connections()


def close_connections_of_this_thread() -> None:
    for connection in connections.all(initialized_only=True):
        try:
            connection.close()
        except DatabaseError:
            pass  # a connection to a database that went away may fail even to close: it is dropped


def close_connections() -> None:
    """Close every ORM pool thread's connection (a database is dropped only once none is open)."""
    if not SHARED_THREAD:  # else nothing ran on the pool
        close_connections_of(POOL, settings.AHP_ORM_THREADS)


def close_connections_of(pool: ThreadPoolExecutor, threads: int) -> None:
    """Close the connection of each of `pool`'s `threads`: one task per thread, each held until
    all have started, so no thread takes two."""
    started = threading.Barrier(threads)
    closing = set()

    def close() -> None:
        closing.add(threading.get_ident())
        connections.close_all()
        started.wait(timeout=30)

    try:
        for done in [pool.submit(close) for _ in range(threads)]:
            done.result()
    except threading.BrokenBarrierError:
        frames = sys._current_frames()
        busy = ["".join(traceback.format_stack(frames[t.ident])) for t in pool._threads
                if t.ident not in closing and t.ident in frames]
        raise RuntimeError("Pool threads still busy after 30 s, so their connections stay open:\n"
                           + "\n".join(busy)) from None
