"""Configured MCP servers' tools in the catalog.

The host lists each server a session was given (through the `mcp` client) and records what
each offers in the session's row (`SessionMcpServers.server_tools`). Every process builds the
session's MCP tools from that row, so another ASGI worker, the Celery worker running a wakeup
turn, or the host after a restart offers and runs the same tools; a call runs against that
session's own server through this process's pooled client session (pool.py). A server that
cannot be listed is recorded as a gap; the session goes on.
"""
import asyncio
import json
import logging
import threading
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

from django.conf import settings
from django.db import close_old_connections

from kernel.orm import database_sync_to_async
from sandbox.outbound import CLIENT_DECLARED
from sessions_app.models import ActiveClient, Session
from tools_app.catalog.registry import InvalidTool, Tool
from tools_app.client_requests import ask_client

from . import client
from .actions import do_record_client_servers, do_record_server_tools
from .models import SessionMcpServers
from .pool import POOL
from .servers import (
    merged_servers,
    plugin_manifest_uris,
    revealed,
    runnable_stdio,
    servers_of_manifest,
    usable_servers,
)

logger = logging.getLogger(__name__)

LIST_TIMEOUT_SECONDS = 20
# How long a turn waits for its session's servers to be listed: a reachable http server lists in
# 1-1.5 s after createSession, a stdio one starts in its sandbox in about as long; one silent for
# several times that is unlikely to answer soon, and a person is waiting for the reply.
LISTING_WAIT_SECONDS = 5
UNANSWERED = ('MCP server "{name}" is unavailable: it did not answer within {seconds} seconds, '
              "so this turn runs without its tools.")
FAILED = 'MCP server "{name}" is unavailable: listing its tools failed, so this turn runs without them.'
PERMISSIVE_SCHEMA = {"type": "object"}  # the server checks its own input


def client_servers(row, active_client_ids):
    """The http servers the session's active clients' plugins contribute, later clients over
    earlier (as the clients' own `.mcp.json` files said when the host asked them), each marked
    CLIENT_DECLARED: a member's client, not the operator, chose where they are."""
    found = {}
    for client_id in active_client_ids:
        found.update((row.client_servers or {}).get(client_id) or {})
    usable = usable_servers(found, f"the client plugins of session {row.session_id}")
    return usable and {name: {**entry, CLIENT_DECLARED: True} for name, entry in usable.items()}


def effective_servers(session, row=None):
    """The map the session's agent gets: what the tenant gave it at start, with servers its
    clients' plugins contribute merged over it (`row`: its SessionMcpServers, when read). None
    when there are none (absent, not empty)."""
    row = row or SessionMcpServers.objects.filter(session=session).first()
    if row is None:
        return None
    active = ActiveClient.objects.filter(session=session).order_by("id").values_list("client_id", flat=True)
    return merged_servers(row.servers, client_servers(row, active))


def runnable_servers(servers):
    """The session's map with each stdio entry replaced by the operator's command it names (one
    the operator no longer defines is left out), and the host folders those commands read."""
    runnable, read_only = {}, []
    for name, entry in (servers or {}).items():
        entry = revealed(entry)  # handed to the agent, which uses them
        if entry["type"] == "stdio":
            resolved = runnable_stdio(entry)
            if resolved is None:
                logger.warning('Left out MCP server "%s": the operator no longer defines "%s".', name, entry["server"])
                continue
            read_only.extend(resolved.get("readOnlyPaths") or ())
            entry = {"type": "stdio", **resolved}
        runnable[name] = entry
    return runnable, read_only


def runnable_session_servers(session):
    """What an agent the host starts for the session is handed: its servers, runnable."""
    return runnable_servers(effective_servers(session))


def ahp_result(tool_name, result):
    """An MCP CallToolResult (wire dict) as an AHP ToolCallResult."""
    content = []
    for item in result.get("content") or ():
        if item.get("type") == "text":
            content.append({"type": "text", "text": item.get("text", "")})
        elif item.get("type") == "resource_link":
            content.append({"type": "resource", "uri": item.get("uri", "")})
    ahp = {"success": not result.get("isError"), "pastTenseMessage": f"Ran {tool_name}", "content": content}
    if result.get("structuredContent") is not None:
        ahp["structuredContent"] = result["structuredContent"]
    if result.get("isError"):
        ahp["error"] = {"message": "\n".join(c["text"] for c in content if c["type"] == "text") or f"{tool_name} failed"}
    return ahp


def _worded(wording, session):
    return wording


def _wording(definition):
    wording = {"description": definition.get("description", ""), "inputSchema": definition.get("inputSchema") or {}}
    for key in ("title", "outputSchema", "annotations"):
        if definition.get(key):
            wording[key] = definition[key]
    return wording


async def run_server_tool(name, tool_name, context, arguments):
    """Call the tool on the calling session's own server `name`, through this process's pooled
    client session."""
    entry = (await database_sync_to_async(effective_servers)(context.session) or {}).get(name)
    if entry is None:
        return {"success": False, "pastTenseMessage": f"{tool_name} failed",
                "error": {"message": f"The MCP server {name} is not available to this session."}}
    result = await POOL.use(context.session, name, entry, lambda s: s.call_tool(tool_name, arguments))
    return ahp_result(tool_name, result.model_dump(by_alias=True, exclude_none=True, mode="json"))


def listed_tool(name: str, definition: dict) -> Tool:
    """The catalog's tool for one entry of server `name`'s listing, run against the session's own
    server; InvalidTool when the host cannot offer it (a name the catalog's pattern refuses)."""
    return Tool(name=definition.get("name", ""), namespace=name, description=definition.get("description", ""),
                input_schema=PERMISSIVE_SCHEMA, executor=partial(run_server_tool, name, definition.get("name")),
                for_session=partial(_worded, _wording(definition)), source="mcp").validate()


def server_tools_of(session_id: object, listings: dict) -> tuple[Tool, ...]:
    """The tools a session's recorded listings offer, each under its server's name (as a
    namespace) and run against that session's server."""
    tools = []
    for name, listing in listings.items():
        for definition in listing.get("tools") or ():
            try:
                tools.append(listed_tool(name, definition))
            except InvalidTool as exc:
                logger.warning("Left out a tool of MCP server %r of session %s: %s", name, session_id, exc)
    return tuple(tools)


_TOOLS: OrderedDict[Any, tuple[Tool, ...]] = OrderedDict()
_TOOLS_SIZE = 1024


def session_server_tools(session):
    """The session's MCP servers' tools as its row records them: the same in every process,
    built once per listing rather than per model request."""
    listings = SessionMcpServers.objects.filter(session=session).values_list("server_tools", flat=True).first()
    if not listings:
        return ()
    key = (str(session.id), json.dumps(listings, sort_keys=True))
    tools = _TOOLS.get(key)
    if tools is None:
        tools = _TOOLS[key] = server_tools_of(session.id, listings)
        if len(_TOOLS) > _TOOLS_SIZE:
            _TOOLS.popitem(last=False)
    return tools


async def list_session_servers(session_id):
    """List the tools of every server the session has; record each server's tools or the
    reason it could not be listed. Answers what was recorded."""
    session = await database_sync_to_async(Session.objects.select_related("tenant").filter(id=session_id).first)()
    if session is None:
        return {}
    servers = await database_sync_to_async(effective_servers)(session) or {}
    listed = {name: await list_server(session, name, entry) for name, entry in servers.items()}
    if listed:
        await database_sync_to_async(do_record_server_tools)(session_id, listed)
    return listed


async def list_server(session, name, entry):
    """{"tools": [...]} the server offers, or {"error": why it could not be listed}."""
    try:
        return {"tools": await POOL.use(session, name, entry, client.list_tools, LIST_TIMEOUT_SECONDS)}
    except Exception as exc:  # one unreachable server is a gap, never a failed session
        while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
            exc = exc.exceptions[0]  # the client's task groups wrap the cause
        reason = f"{exc.__class__.__name__}: {exc}" if str(exc) else exc.__class__.__name__
        logger.warning("Could not list the tools of MCP server %r for session %s: %s", name, session.id, reason)
        return {"error": reason}


def servers_and_listings(session):
    """The session's servers and what is recorded of each one's tools."""
    row = SessionMcpServers.objects.filter(session=session).first()
    if row is None or not (row.servers or row.client_servers):
        return {}, {}
    return effective_servers(session, row) or {}, row.server_tools or {}


async def settle_listings(session):
    """Before a turn's first model request: list each of the session's servers nothing is recorded
    of yet (the listing createSession queued may still run, here or in another process), waiting
    at most LISTING_WAIT_SECONDS. Answers a sentence for each server the turn runs without."""
    servers, listings = await database_sync_to_async(servers_and_listings)(session)
    missing = {name: asyncio.ensure_future(list_server(session, name, entry))
               for name, entry in servers.items() if name not in listings}
    if missing:
        await asyncio.wait(missing.values(), timeout=LISTING_WAIT_SECONDS)
        listed = {name: task.result() for name, task in missing.items() if task.done()}
        for task in missing.values():
            task.cancel()  # a late answer is recorded by createSession's own listing
        if listed:
            await database_sync_to_async(do_record_server_tools)(session.id, listed)
            listings = {**listings, **listed}
    return [(UNANSWERED if name not in listings else FAILED).format(name=name, seconds=LISTING_WAIT_SECONDS)
            for name in servers if "tools" not in listings.get(name, {})]


class ListingPool:
    """Listing spawns processes and opens sockets: never inside a request or a transaction, and
    at most `workers` sessions at once per process, however many start together. A session
    already waiting is not queued twice."""

    def __init__(self, workers):
        self.executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="mcp-list")
        self.lock = threading.Lock()
        self.waiting = set()

    def submit(self, session_id):
        with self.lock:
            if session_id in self.waiting:
                return None
            self.waiting.add(session_id)
        return self.executor.submit(self.run, session_id)

    def run(self, session_id):
        with self.lock:
            self.waiting.discard(session_id)
        try:
            return asyncio.run(list_session_servers(session_id))
        except Exception:
            logger.exception("Listing the MCP servers of session %s failed", session_id)
        finally:
            close_old_connections()


LISTING = ListingPool(settings.AHP_MCP_LISTING_WORKERS)


def list_in_background(session_id):
    """Queue the listing of the session's servers; a Future of what was recorded."""
    return LISTING.submit(session_id)


async def learn_client_plugins(tenant_id, session_id, client_id, owner_id, customizations):
    """Ask the client for each of its plugins' `.mcp.json` (the file is on the client's
    machine), keep the http servers they declare for this session, and list them."""
    found = {}
    for plugin_uri, manifest_uri in plugin_manifest_uris(customizations).items():
        ok, text = await ask_client(tenant_id, client_id, manifest_uri, owner_id=owner_id)
        if not ok:
            logger.warning("Could not read the MCP servers of plugin %s: %s", plugin_uri, text)
            continue
        found.update(servers_of_manifest(text, plugin_uri))
    await database_sync_to_async(do_record_client_servers)(session_id, client_id, found)
    if found:
        list_in_background(session_id)
