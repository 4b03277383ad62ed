"""Where host tools' synchronous bodies run: threads of their own, at most a few bodies of one
tenant at once.

A body may take long (a command in a computer runs for up to a minute, a forge's API answers
slowly). On the ORM threads it would keep every socket's hops waiting; on the event loop's
default executor, which is also where addresses are resolved, enough of one tenant's long calls
took every thread, and every other tenant's host tools waited for them. Here a tenant whose
agents keep `per_tenant` bodies running (AHP_TOOL_THREADS_PER_TENANT) waits on its own calls, and
the others run.

A body that outlives its deadline (AHP_HOST_TOOL_SECONDS: longer than any of the host's own tools
may take, so only a runaway plugin's body reaches it) cannot be stopped: Python has no way to kill
a thread. Its caller stops waiting and the body is abandoned: it gives back its tenant's slot and
its place among the `threads`, and runs on in one of `abandoned_at_most` spare threads. Once those
are taken, an overrunning body keeps its slot, so a tool that always hangs stalls its own tenant,
never the others.
"""
import asyncio
import contextvars
import logging
import threading
import weakref
from concurrent.futures import ThreadPoolExecutor

from django.conf import settings

from kernel import orm

logger = logging.getLogger(__name__)


class Overran(Exception):
    """A body did not return by its deadline; its caller stopped waiting for it."""


class ToolThreads:
    def __init__(self, threads, per_tenant, deadline, abandoned_at_most):
        self.threads = threads
        self.per_tenant = per_tenant
        self.deadline = deadline
        self.abandoned_at_most = abandoned_at_most
        self.abandoned = 0  # bodies past their deadline, still running; under self._lock
        self._lock = threading.Lock()
        self.pool_threads = threads + abandoned_at_most
        self.pool = ThreadPoolExecutor(self.pool_threads, thread_name_prefix="tools")
        # event loop -> (asyncio.Semaphore of `threads`, {tenant id: asyncio.Semaphore of `per_tenant`})
        self._slots = weakref.WeakKeyDictionary()

    async def run(self, tenant_id, func, *args):
        """`func(*args)` on a tool thread, once fewer than `per_tenant` bodies of the tenant run.
        A body keeps its slot until it returns, even if its caller stopped waiting for it, unless
        it overran its deadline and was abandoned (raises Overran)."""
        loop = asyncio.get_running_loop()
        running, tenants = self._slots.get(loop) or self._slots.setdefault(loop, (asyncio.Semaphore(self.threads), {}))
        held = []
        try:
            for slot in (tenants.get(tenant_id) or tenants.setdefault(tenant_id, asyncio.Semaphore(self.per_tenant)),
                         running):
                await slot.acquire()
                held.append(slot)
            body = self.pool.submit(contextvars.copy_context().run, _body, loop, func, args)
        except BaseException:
            _release(held)
            raise
        body.add_done_callback(lambda _: loop.is_closed() or loop.call_soon_threadsafe(_release, held))
        try:
            return await self.within_deadline(asyncio.shield(asyncio.wrap_future(body)))
        except Overran:
            if body.done():  # it returned as the deadline passed
                return body.result()
            if self._abandon(body, func):
                _release(held)
            raise

    async def within_deadline(self, awaitable):
        """`awaitable`'s answer, or Overran once the deadline passed (it is cancelled: a host
        tool's coroutine, or the shield around a body's thread)."""
        try:
            async with asyncio.timeout(self.deadline) as deadline:
                return await awaitable
        except TimeoutError:
            if deadline.expired():
                raise Overran() from None
            raise

    def _abandon(self, body, func):
        with self._lock:
            if self.abandoned >= self.abandoned_at_most:
                logger.warning("Host tool body %s overran %g s and keeps its tenant's slot: %d abandoned bodies "
                               "already run", getattr(func, "__name__", func), self.deadline, self.abandoned)
                return False
            self.abandoned += 1
        logger.warning("Host tool body %s overran %g s; abandoned, it runs on in a spare thread (%d of %d)",
                       getattr(func, "__name__", func), self.deadline, self.abandoned, self.abandoned_at_most)
        body.add_done_callback(self._forget)
        return True

    def _forget(self, _body):
        with self._lock:
            self.abandoned -= 1

    def close_connections(self):
        orm.close_connections_of(self.pool, self.pool_threads)  # the spare threads' too


def _release(held):
    while held:
        held.pop().release()


def _body(loop, func, args):
    orm.works_for(loop)
    return orm.with_checked_connections(func, *args)


TOOL_THREADS = ToolThreads(settings.AHP_TOOL_THREADS, settings.AHP_TOOL_THREADS_PER_TENANT,
                           settings.AHP_HOST_TOOL_SECONDS, settings.AHP_TOOL_THREADS_ABANDONED)
