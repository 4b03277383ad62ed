"""Ending the rows of this process's closed sockets: each socket that closes while a batch is
being written ends in the next batch, in one transaction (a tenant closing a thousand sockets at
once costs a handful of statements, not thousands, on the database thread every socket of the
process shares), written by a task of the process's own, so a socket whose handler the server
stops waiting for (daphne's application_close_timeout) still has its row ended."""
import asyncio
import logging
import weakref

from kernel.orm import database_sync_to_async
from sessions_app.actions import do_close_connections
from tools_app.config import HostConfig

logger = logging.getLogger(__name__)

BATCH = 500  # connections per transaction


class Closings:
    def __init__(self):
        self.waiting = []  # (connection id, tenant, schedule releases?, future)
        self.writer = None

    async def close(self, connection_id, tenant, schedule=True):
        """Once the connection's batch was written (or failed: then the sweep ends the rows)."""
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        self.waiting.append((connection_id, tenant, schedule, done))
        if self.writer is None or self.writer.done():
            self.writer = loop.create_task(self.write())
        await asyncio.shield(done)

    async def write(self):
        while self.waiting:
            batch, self.waiting = self.waiting[:BATCH], self.waiting[BATCH:]
            try:
                await database_sync_to_async(end_rows)(batch)
            except Exception:
                # Untracked, their rows go stale and the sweep closes them by the disconnect rule.
                logger.exception("Could not close %d connections; the sweep will", len(batch))
            for *_, done in batch:
                done.set_result(None)


def end_rows(batch):
    from sessions_app.tasks import release_client

    tenants = {tenant.pk: tenant for _, tenant, _, _ in batch}

    def timeout_ms(tenant_id):
        return HostConfig.current(tenants[tenant_id]).client_tool_call_disconnect_timeout_ms

    due = do_close_connections([connection_id for connection_id, *_ in batch], timeout_ms)
    # Without the channel layer the broker (the same Redis) is down too: the sweep releases them when due.
    if all(schedule for _, _, schedule, _ in batch):
        for pk, when in due:
            release_client.apply_async((pk,), eta=when)


_closings = weakref.WeakKeyDictionary()  # event loop -> its Closings


async def close_connection(connection_id, tenant, schedule=True):
    loop = asyncio.get_running_loop()
    closings = _closings.get(loop)
    if closings is None:
        closings = _closings[loop] = Closings()
    await closings.close(connection_id, tenant, schedule)
