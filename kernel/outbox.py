"""Sends to the channel layer made for a database thread, so it never waits on the layer.

A `do_*` function's after-commit delivery runs on the thread that committed. When that thread
works for a serving event loop (a `database_sync_to_async` hop of a socket or a turn in a
process holding sockets), the send is handed to that loop and the thread goes on at once; one
task per loop makes the sends in the order they were handed over, so a channel's actions still
arrive in serverSeq order. Any other thread (a Celery task, a management command, a loop that
ends with its work, whose pending sends would be dropped with it) sends and waits.
"""
import asyncio
import logging
import os
import weakref

from asgiref.sync import SyncToAsync, async_to_sync

logger = logging.getLogger(__name__)

_queues = weakref.WeakKeyDictionary()  # serving event loop -> its queue of (what, send)


def serve_from(loop):
    """`loop` runs as long as the process serves: sends for its threads may be handed to it."""
    if loop not in _queues:
        _queues[loop] = asyncio.Queue()
        loop.create_task(_drain(_queues[loop]))


def send_soon(what, send):
    """Run the coroutine function `send` on the channel layer. The change it reports is
    committed, so a layer that is down (Redis restarting) must not turn it into an error for
    whoever made it: the failure is logged (and the host closes its sockets with 1012, clients
    catch up with `reconnect`; waiters read their rows)."""
    loop = _loop_of_this_thread()
    queue = _queues.get(loop) if loop is not None else None
    if queue is None or loop.is_closed():
        try:
            async_to_sync(send)()
        except Exception as exc:
            _log_failure(what, exc)
        return
    loop.call_soon_threadsafe(queue.put_nowait, (what, send))


def _loop_of_this_thread():
    """The event loop this thread works for: the one `async_to_sync` here would use."""
    local = SyncToAsync.threadlocal
    if getattr(local, "main_event_loop_pid", None) != os.getpid():
        return None
    return getattr(local, "main_event_loop", None)


async def _drain(queue):
    while True:
        what, send = await queue.get()
        try:
            await send()
        except Exception as exc:
            _log_failure(what, exc)


def _log_failure(what, exc):
    logger.warning("Could not deliver %s through the channel layer (%s: %s); clients catch up by reconnect",
                   what, exc.__class__.__name__, exc)
