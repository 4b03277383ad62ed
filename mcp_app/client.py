"""Talking to a configured MCP server through the official `mcp` client, stdio or http.
An http server is reached only where sandbox.outbound allows, every redirect hop re-checked;
stored secrets are opened here, where they are used, and nowhere else."""
import contextlib
import os
from datetime import timedelta

import httpx
from mcp import ClientSession, StdioServerParameters
from mcp.types import PaginatedRequestParams
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from sandbox.outbound import AsyncOutboundTransport, acheck_url
from tools_app.host_config import scrubbed, secret_values

from .servers import revealed

LIST_TIMEOUT_SECONDS = 20


@contextlib.asynccontextmanager
async def connected(entry, timeout=LIST_TIMEOUT_SECONDS):
    """An initialized ClientSession on the server `entry` describes."""
    entry = revealed(entry)
    try:
        async with _connected(entry, timeout) as session:
            yield session
    except Exception as failure:
        # What went wrong is logged and recorded: never with the server's credentials in it.
        scrubbed(failure, secret_values(entry))
        raise


@contextlib.asynccontextmanager
async def _connected(entry, timeout):
    if entry["type"] == "stdio":
        params = StdioServerParameters(
            command=entry["command"], args=list(entry.get("args") or ()), cwd=entry.get("cwd"),
            # A server inherits the host's PATH and the like, plus its own credentials.
            env={**os.environ, **(entry.get("env") or {})},
        )
        transport = stdio_client(params)
    else:
        await acheck_url(entry["url"])  # refused at once, with its sentence, not deep in the client
        # The mcp client follows only same-origin redirects; the transport re-checks each hop.
        http = httpx.AsyncClient(headers=entry.get("headers") or {}, timeout=timeout,
                                 transport=AsyncOutboundTransport())
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


async def list_tools(entry):
    """The server's tool definitions as MCP wire dicts."""
    async with connected(entry) as session:
        tools, cursor = [], None
        while True:
            page = await session.list_tools(params=PaginatedRequestParams(cursor=cursor) if cursor else None)
            tools.extend(t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in page.tools)
            cursor = page.nextCursor
            if not cursor:
                return tools


async def call_tool(entry, name, arguments):
    """The server's CallToolResult for one call, as a wire dict."""
    async with connected(entry) as session:
        result = await session.call_tool(name, arguments)
        return result.model_dump(by_alias=True, exclude_none=True, mode="json")
