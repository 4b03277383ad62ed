"""Where host tools' synchronous bodies run: threads of their own, at most a few bodies of one
tenant at once.

A body may take long (a command in a computer runs for up to a minute, a forge's API answers
slowly). On the ORM threads it would keep every socket's hops waiting; on the event loop's
default executor, which is also where addresses are resolved, enough of one tenant's long calls
took every thread, and every other tenant's host tools waited for them. Here a tenant whose
agents keep `per_tenant` bodies running (AHP_TOOL_THREADS_PER_TENANT) waits on its own calls, and
the others run.
"""
import asyncio
import contextvars
import weakref
from concurrent.futures import ThreadPoolExecutor

from django.conf import settings

from kernel import orm


class ToolThreads:
    def __init__(self, threads, per_tenant):
        self.threads = threads
        self.per_tenant = per_tenant
        self.pool = ThreadPoolExecutor(threads, thread_name_prefix="tools")
        self._slots = weakref.WeakKeyDictionary()  # event loop -> {tenant id: asyncio.Semaphore}

    async def run(self, tenant_id, func, *args):
        """`func(*args)` on a tool thread, once fewer than `per_tenant` bodies of the tenant run.
        A body keeps its slot until it returns, even if its caller stopped waiting for it."""
        loop = asyncio.get_running_loop()
        slots = self._slots.setdefault(loop, {})
        slot = slots.get(tenant_id)
        if slot is None:
            slot = slots[tenant_id] = asyncio.Semaphore(self.per_tenant)
        await slot.acquire()
        try:
            body = self.pool.submit(contextvars.copy_context().run, _body, loop, func, args)
        except BaseException:
            slot.release()
            raise
        body.add_done_callback(lambda _: loop.is_closed() or loop.call_soon_threadsafe(slot.release))
        return await asyncio.wrap_future(body)

    def close_connections(self):
        orm.close_connections_of(self.pool, self.threads)


def _body(loop, func, args):
    orm.works_for(loop)
    return orm.with_checked_connections(func, *args)


TOOL_THREADS = ToolThreads(settings.AHP_TOOL_THREADS, settings.AHP_TOOL_THREADS_PER_TENANT)
