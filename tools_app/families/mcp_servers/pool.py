"""One live MCP client session per (AHP session, server) in this process.

A stdio server keeps running in its session's sandbox between calls instead of being started
for each one; an http server keeps its MCP session. Every pooled session lives on one event
loop this module owns, so a turn on any loop (the ASGI server's, a Celery worker's own) may use
it. A connection that failed a call is replaced on the next one; a session's connections
close when the session ends, here or (seen by the reaper) in another process, and any connection
unused for AHP_MCP_IDLE_SECONDS closes too: its stdio server's process ends."""
import asyncio
import logging
import threading

from django.conf import settings
from django.db import connection

from sandbox.outbound import CLIENT_DECLARED, acheck_url
from tools_app.credentials import scrubbed, secret_values

from . import client
from .servers import fingerprint, revealed

logger = logging.getLogger(__name__)

CALL_TIMEOUT_SECONDS = 120
LONGEST_REAP_PAUSE_SECONDS = 30


class Pooled:
    """A connection being held open: `ready` resolves to its ClientSession, `stop` closes it."""

    def __init__(self, key):
        self.key = key
        self.ready = asyncio.get_running_loop().create_future()
        self.stop = asyncio.Event()
        self.task = None
        self.in_use = 0
        self.last_used = asyncio.get_running_loop().time()


class ClientPool:
    def __init__(self):
        self.lock = threading.Lock()
        self.loop = None
        self.held = {}  # (session id, server name) -> Pooled; touched on the pool's loop only

    def _loop(self):
        with self.lock:
            if self.loop is None:
                self.loop = asyncio.new_event_loop()
                threading.Thread(target=self.loop.run_forever, name="mcp-pool", daemon=True).start()
                asyncio.run_coroutine_threadsafe(self._reap_forever(), self.loop)
            return self.loop

    async def use(self, session, name, entry, work, timeout=CALL_TIMEOUT_SECONDS):
        """`await work(client_session)` on the pooled connection to `session`'s server `name`."""
        future = asyncio.run_coroutine_threadsafe(self._use(session, name, entry, work, timeout), self._loop())
        return await asyncio.wrap_future(future)

    def reap_now(self):
        """Run the reaper once, now (what its timer does every so often), and wait for it."""
        asyncio.run_coroutine_threadsafe(self.reap(), self._loop()).result(30)

    def close_session(self, session_id):
        """Close every connection held for the session (its servers stop with their sandbox)."""
        if self.loop is not None:
            self.loop.call_soon_threadsafe(self._close_session, str(session_id))

    async def _use(self, session, name, entry, work, timeout):
        pooled = await self._connection(session, name, entry)
        pooled.in_use += 1
        try:
            if entry.get("type") == "http":
                # Each use, as the allow-list says now: a kept connection outlives a withdrawal.
                await acheck_url(entry["url"], bool(entry.get(CLIENT_DECLARED)))
            return await asyncio.wait_for(work(await pooled.ready), timeout)
        except Exception as failure:
            # Tool errors come back as results: a raise is the connection's (closed, hung), so
            # the next call connects afresh.
            self._drop(pooled)
            raise scrubbed(failure, secret_values(revealed(entry))) from None  # the cause would carry the secrets
        finally:
            pooled.in_use -= 1
            pooled.last_used = asyncio.get_running_loop().time()

    async def _connection(self, session, name, entry):
        key = (str(session.id), name)
        pooled = self.held.get(key)
        if pooled is not None and not pooled.task.done() and pooled.key == fingerprint(entry):
            return pooled
        if pooled is not None:
            self._drop(pooled)
        pooled = self.held[key] = Pooled(fingerprint(entry))
        pooled.task = asyncio.get_running_loop().create_task(self._hold(key, pooled, entry, session))
        return pooled

    async def _hold(self, key, pooled, entry, session):
        try:
            async with client.connected(entry, session) as client_session:
                pooled.ready.set_result(client_session)
                await pooled.stop.wait()
        except BaseException as exc:  # noqa: BLE001 - the waiting call gets the cause
            if not pooled.ready.done():
                pooled.ready.set_exception(exc if isinstance(exc, Exception) else ConnectionError(str(exc)))
            else:
                logger.info("MCP server %s of session %s closed: %s", key[1], key[0], exc.__class__.__name__)
        finally:
            if self.held.get(key) is pooled:
                del self.held[key]

    def _drop(self, pooled):
        pooled.stop.set()
        for key, held in list(self.held.items()):
            if held is pooled:
                del self.held[key]

    def _close_session(self, session_id):
        for key, pooled in list(self.held.items()):
            if key[0] == session_id:
                self._drop(pooled)

    async def _reap_forever(self):
        while True:
            await asyncio.sleep(min(LONGEST_REAP_PAUSE_SECONDS, settings.AHP_MCP_IDLE_SECONDS / 2))
            try:
                await self.reap()
            except Exception:  # noqa: BLE001 - a failed look (the database away) waits for the next
                logger.exception("The MCP pool could not look for idle connections")

    async def reap(self):
        """Close connections nobody used for AHP_MCP_IDLE_SECONDS, and those of sessions that no
        longer exist (disposed by another process, whose close never reached this one)."""
        now = asyncio.get_running_loop().time()
        for key, pooled in list(self.held.items()):
            if not pooled.in_use and now - pooled.last_used >= settings.AHP_MCP_IDLE_SECONDS:
                logger.info("Closing MCP server %s of session %s: unused for %ds", key[1], key[0],
                            now - pooled.last_used)
                self._drop(pooled)
        held_sessions = {key[0] for key in self.held}
        if not held_sessions:
            return
        alive = await asyncio.get_running_loop().run_in_executor(None, existing_sessions, held_sessions)
        for session_id in held_sessions - alive:
            self._close_session(session_id)


def existing_sessions(session_ids):
    from sessions_app.models import Session

    try:
        return {str(pk) for pk in Session.objects.filter(id__in=session_ids).values_list("id", flat=True)}
    finally:
        connection.close()  # an executor thread's own connection; it may not run again for long


POOL = ClientPool()
