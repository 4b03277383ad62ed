"""Shared by the MCP tests: host tools to call, and the official `mcp` client over a real socket."""
import asyncio
import time

import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from tools_app.catalog.host_tools import REGISTRY
from tools_app.catalog.registry import Tool


def add(context, arguments):
    return str(arguments["a"] + arguments["b"])


def explode(context, arguments):
    raise ValueError("the fuse was lit")


def whoami(context, arguments):
    return f"{context.principal.name} in turn {context.turn.id}"


HOST_TOOLS = (
    Tool("add", description="Add two numbers", executor=add,
         input_schema={"type": "object", "required": ["a", "b"],
                       "properties": {"a": {"type": "number"}, "b": {"type": "number"}}}),
    Tool("explode", description="Always raises", executor=explode),
    Tool("whoami", description="Who the call acts as", executor=whoami),
)


@pytest.fixture
def host_tools():
    def transform(editor):
        for tool in HOST_TOOLS:
            editor.add(tool)

    registration = REGISTRY.register(transform, label="mcp-tests")
    yield HOST_TOOLS
    registration.dispose()


async def _in_mcp_session(url, token, work):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx.AsyncClient(headers=headers, timeout=30) as http:
        async with streamable_http_client(url, http_client=http) as (read, write, _):
            async with ClientSession(read, write) as session:
                await session.initialize()
                return await work(session)


def with_mcp(url, token, work):
    """Run `work(session)` in an initialized official-client session on `url`; a failure is
    raised as itself, not wrapped in the client's task group."""
    try:
        return asyncio.run(_in_mcp_session(url, token, work))
    except BaseExceptionGroup as group:
        leaf = group
        while isinstance(leaf, BaseExceptionGroup) and len(leaf.exceptions) == 1:
            leaf = leaf.exceptions[0]
        raise leaf from None


def tools_endpoint(port, token, session_uri):
    session_id = session_uri.split("/")[-1]
    response = httpx.get(f"http://127.0.0.1:{port}/api/v1/sessions/{session_id}/tools-endpoint",
                         headers={"Authorization": f"Bearer {token}"})
    return response


def wait_until(predicate, timeout=20, describe="the condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"{describe} did not hold within {timeout}s")
