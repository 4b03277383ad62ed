"""Talking to a configured MCP server through the official `mcp` client, stdio or http.

A stdio server is the operator's command, run in the sandbox of the session that uses it. An
http server is reached only where sandbox.outbound allows, every redirect hop re-checked;
stored secrets are opened here, where they are used, and nowhere else."""
import contextlib
from datetime import timedelta

import httpx
from channels.db import database_sync_to_async
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import PaginatedRequestParams

from sandbox.bubblewrap import session_sandbox
from sandbox.outbound import CLIENT_DECLARED, AsyncOutboundTransport, acheck_url
from tools_app.credentials import scrubbed, secret_values

from .servers import revealed, runnable_stdio

LIST_TIMEOUT_SECONDS = 20


@contextlib.asynccontextmanager
async def connected(entry, for_session, timeout=LIST_TIMEOUT_SECONDS):
    """An initialized ClientSession on the server `entry` describes, for the AHP session `for_session`."""
    entry = revealed(entry)
    try:
        async with _connected(entry, for_session, timeout) as session:
            yield session
    except Exception as failure:
        # What went wrong is logged and recorded: never with the server's credentials in it.
        scrubbed(failure, secret_values(entry))
        raise


@contextlib.asynccontextmanager
async def _connected(entry, for_session, timeout):
    if entry["type"] == "stdio":
        runnable = await database_sync_to_async(runnable_stdio)(entry)
        if runnable is None:
            raise LookupError(f'No stdio MCP server named "{entry.get("server")}" is defined on this host.')
        sandbox = session_sandbox(for_session, read_only=runnable.get("readOnlyPaths") or ())
        argv = sandbox.argv([runnable["command"], *runnable.get("args", ())], env=runnable.get("env"))
        # The sandbox clears the environment: the server sees only its own entry's.
        transport = stdio_client(StdioServerParameters(command=argv[0], args=argv[1:], env={}))
    else:
        declared = bool(entry.get(CLIENT_DECLARED))
        await acheck_url(entry["url"], declared)  # refused at once, with its sentence, not deep in the client
        # The mcp client follows only same-origin redirects; the transport re-checks each hop.
        http = httpx.AsyncClient(headers=entry.get("headers") or {}, timeout=timeout,
                                 transport=AsyncOutboundTransport(client_declared=declared))
        transport = _http_transport(entry["url"], http)
    async with transport as streams:
        read, write = streams[0], streams[1]
        async with ClientSession(read, write, read_timeout_seconds=timedelta(seconds=timeout)) as session:
            await session.initialize()
            yield session


@contextlib.asynccontextmanager
async def _http_transport(url, http):
    async with http, streamable_http_client(url, http_client=http) as streams:
        yield streams


async def list_tools(session):
    """The tool definitions of the server `session` (an initialized ClientSession) is connected
    to, as MCP wire dicts."""
    tools, cursor = [], None
    while True:
        page = await session.list_tools(params=PaginatedRequestParams(cursor=cursor) if cursor else None)
        tools.extend(t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in page.tools)
        cursor = page.nextCursor
        if not cursor:
            return tools
