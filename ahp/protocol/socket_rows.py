"""A socket's rows, written in batches: the sockets of a process that open (or close) while a
batch is being written are written by the next, in one transaction. A tenant opening or closing a
thousand sockets at once then costs the database a handful of statements and commits, not
thousands, and the process a handful of hops onto its ORM threads. A batch is written by a task of
the process's own, so a socket whose handler the server stops waiting for (daphne's
application_close_timeout) still has its row ended."""
import asyncio
import logging
import weakref
from collections.abc import Callable
from typing import Any
from uuid import UUID

from grants.models import Tenant
from kernel.orm import database_sync_to_async
from sessions_app.actions import do_close_connections, do_open_connections
from tools_app.config import HostConfig

logger = logging.getLogger(__name__)

BATCH = 500  # sockets per transaction
Write = Callable[[list[Any]], list[Any]]  # items -> one result per item, on the ORM threads


class Batches:
    """Items handed to `write` (a function of a list of items answering one result per item, run
    on the ORM threads) in batches: whatever arrives while a batch is written goes in the next."""

    def __init__(self, write: Write) -> None:
        self.write = write
        self.waiting: list[tuple[Any, asyncio.Future]] = []  # (item, future)
        self.writer: asyncio.Task | None = None

    async def written(self, item: Any) -> Any:
        """`item`'s result, once its batch was written; its batch's exception when that failed."""
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        done.add_done_callback(lambda f: f.exception())  # seen, even when the caller was cancelled meanwhile
        self.waiting.append((item, done))
        if self.writer is None or self.writer.done():
            self.writer = loop.create_task(self.write_all())
        return await asyncio.shield(done)

    async def write_all(self) -> None:
        while self.waiting:
            batch, self.waiting = self.waiting[:BATCH], self.waiting[BATCH:]
            try:
                results = await database_sync_to_async(self.write)([item for item, _ in batch])
            except Exception as exc:
                logger.warning("Could not write %d sockets' rows (%s: %s)", len(batch), exc.__class__.__name__, exc)
                for _, done in batch:
                    done.set_exception(exc)
            else:
                for (_, done), result in zip(batch, results, strict=True):
                    done.set_result(result)


def end_rows(closings: list[tuple[UUID, Tenant, bool]]) -> list[None]:
    """Each closing is (connection id, tenant, schedule releases?)."""
    from sessions_app.tasks import release_client

    tenants = {tenant.pk: tenant for _, tenant, _ in closings}

    def timeout_ms(tenant_id: int) -> int:
        return HostConfig.current(tenants[tenant_id]).client_tool_call_disconnect_timeout_ms

    due = do_close_connections([connection_id for connection_id, _, _ in closings], timeout_ms)
    # Without the channel layer the broker (the same Redis) is down too: the sweep releases them when due.
    if all(schedule for _, _, schedule in closings):
        for pk, when in due:
            release_client.apply_async((pk,), eta=when)
    return [None] * len(closings)


# event loop -> {write function: its Batches}
_batches: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[Write, Batches]] = weakref.WeakKeyDictionary()


async def written(write: Write, item: Any) -> Any:
    batches = _batches.setdefault(asyncio.get_running_loop(), {})
    if write not in batches:
        batches[write] = Batches(write)
    return await batches[write].written(item)


async def open_connection(tenant: Tenant, client_id: str, process: str, person: Any, channel: str) -> tuple[Any, int]:
    """(The connection's row, the tenant's newest serverSeq), written with the other sockets
    opening meanwhile."""
    return await written(do_open_connections, (tenant, client_id, process, person, channel))


async def close_connection(connection_id: UUID, tenant: Tenant, schedule: bool = True) -> None:
    """Once the connection's batch was written, or failed: then the sweep ends the rows, as
    untracked they go stale and it closes them by the disconnect rule."""
    try:
        await written(end_rows, (connection_id, tenant, schedule))
    except Exception:
        pass  # logged once for the batch
