"""The per-session MCP tools endpoint, `/ahp-mcp/<session uuid>`, mounted beside Django.

Built on the official `mcp` SDK: its low-level Server answers `initialize`, `tools/list` and
`tools/call` (and `ping`, which every MCP peer must answer) over streamable HTTP, stateless
with JSON responses, so any worker process can serve any request. Before the SDK sees a
request, this module answers anything but POST with 405, finds the endpoint token (404 when
it is unknown, or its ApiToken revoked, its person deactivated or out of the tenant, or no
longer holding session:write), refuses bodies over MAX_BODY_BYTES (413) and frames the socket
would refuse (400), and answers -32601 for any other method.

Who a call acts as: a person's token acts as that person, with their grants as they are now.
It joins the default chat's active turn when that turn is theirs, and otherwise the host begins
a turn sent by them, so the chat and the audit name whoever called. That turn is the attached
agent's while it keeps calling: it ends once none of its calls is open and none came for
QUIET_TURN_SECONDS (one turn per burst of work rather than a turn begun and ended per call), or
at once when another person's call finds it with no call open. The token of the agent the host
started (the `acp` provider's) acts only within the turn it is answering, as that turn's sender.
"""
import asyncio
import functools
import json
import logging
import time
import uuid
from typing import Any, Literal

import anyio
import anyio.abc
from django.db import InterfaceError, OperationalError, connection
from django.db.models.signals import post_delete
from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.streamable_http import StreamableHTTPServerTransport

from ahp.asgi_io import App, Message, Receive, Scope, Send, header, send_json
from ahp.protocol import errors, frames, homes, methods
from grants import liveness
from grants.authentication import token_from_headers
from grants.models import Principal, Tenant
from kernel.lru_cache import LruCache
from kernel.orm import database_sync_to_async
from kernel.outbox import serve_from
from kernel.refusals import Refused
from kernel.rows import Columns, fetch_one, table
from sessions_app import actions
from sessions_app.events.heartbeat import keep_process_alive
from sessions_app.events.sockets import HEARTBEAT_SECONDS
from sessions_app.models import PUBLISHED_TOOLS, Chat, Session, Turn
from sessions_app.tools_endpoint import ToolsEndpoint, remember_listener
from tools_app.catalog.catalog import CatalogSnapshot
from tools_app.catalog.loader import catalog_for_chat
from tools_app.queries import running_turn
from tools_app.runtime.toolbox import ChatToolbox

from .at_home import OpenEndpoint, answer_calls_with, call_at_home

PATH_PREFIX = "/ahp-mcp/"
WRONG_TOKEN = "This tools server answers only its own session's token"
NO_ENDPOINT = "There is no open tools endpoint here."
NOT_POST = "This tools server answers POST only."
NO_TURN_FOR_AGENT = "No turn is running in this session for the agent to act in."
ANOTHER_PERSONS_TURN = "Another person's turn is running in this session's default chat; call again once it ends."
MAX_BODY_BYTES = 1024 * 1024
TOO_LARGE = f"The request body is larger than {MAX_BODY_BYTES} bytes."
ANSWERED_METHODS = frozenset({"initialize", "tools/list", "tools/call", "ping"})
TURN_TEXT = "Tool calls from an agent attached to the session's MCP tools endpoint"
# MCP's ToolDefinition has no AHP-only keys.
AHP_ONLY_KEYS = ("availability",)
QUIET_TURN_SECONDS = 2.0
# A database that did not answer (restarting): the quiet turn's watch asks again.
DATABASE_DOWN = (OperationalError, InterfaceError)

logger = logging.getLogger(__name__)

# Rows ------------------------------------------------------------------------------------------

def open_endpoint(session_id: uuid.UUID, token: str) -> OpenEndpoint | None:
    """The endpoint `token` opens on the session, checked as of now, or None."""
    row = (ToolsEndpoint.objects.select_related("session__tenant", "api_token__tenant", "api_token__person")
           .filter(session_id=session_id, token_sha256=ToolsEndpoint.digest(token)).first())
    if row is None:
        return None
    session, api_token = row.session, row.api_token
    if api_token is None:
        return OpenEndpoint(session.id, session.tenant_id, None, for_agent=True)
    if api_token.revoked is not None:
        return None
    if api_token.person is not None and not (api_token.person.is_active and api_token.person_belongs()):
        return None
    if not Principal.for_token(api_token).may("session:write", session):
        return None
    return OpenEndpoint(session.id, session.tenant_id, api_token.person_id, for_agent=False)


# Endpoint checks this process made: (session id, token digest) -> (OpenEndpoint, the liveness
# count read before the check, when). An agent calls many times a second; its token is read again
# only when access may have changed: a change committed in this process or, on the embedded
# host, in another of its processes (grants.liveness; the endpoint's own rows deleted count too),
# or HEARTBEAT_SECONDS after the check, the bound within which a socket of this process learns of
# a change committed in another.
_checked: dict[tuple[uuid.UUID, str], tuple[OpenEndpoint, Any, float]] = {}
CHECKS_KEPT = 10_000
post_delete.connect(liveness.changed_after_commit, sender=ToolsEndpoint, dispatch_uid="liveness-delete-ToolsEndpoint")


async def checked_endpoint(session_id: uuid.UUID, token: str) -> OpenEndpoint | None:
    """`open_endpoint`, answered from this process's last check while it holds."""
    key = (session_id, ToolsEndpoint.digest(token))
    now = time.monotonic()
    kept = _checked.get(key)
    if kept is not None and kept[1] == liveness.current() and now - kept[2] < HEARTBEAT_SECONDS:
        return kept[0]
    reading = liveness.current()
    endpoint = await database_sync_to_async(open_endpoint)(session_id, token)
    if endpoint is None:
        _checked.pop(key, None)
        return None
    if len(_checked) >= CHECKS_KEPT:
        _checked.clear()
    _checked[key] = (endpoint, reading, now)
    return endpoint


def default_chat(session_id: uuid.UUID) -> Chat:
    """The session's default chat, with its session (all but its published tools) and tenant: one
    hand-written statement, as every `tools/list` reads it."""
    columns, sql = _default_chat_reading()
    found = fetch_one(columns, sql, [Session._meta.pk.get_db_prep_value(session_id, connection), True])
    if found is None:
        raise Chat.DoesNotExist(f"Session {session_id} has no default chat.")
    (chat, session, tenant), _ = found
    session.tenant, chat.session = tenant, session
    return chat


@functools.cache
def _default_chat_reading() -> tuple[tuple[Columns, ...], str]:
    columns = (Columns(Chat, "c"), Columns(Session, "s", leave=(PUBLISHED_TOOLS,)), Columns(Tenant, "n"))
    return columns, (f"SELECT {', '.join(c.sql for c in columns)} FROM {table(Chat)} c "
                     f"JOIN {table(Session)} s ON s.id = c.session_id JOIN {table(Tenant)} n ON n.id = s.tenant_id "
                     "WHERE c.session_id = %s AND c.is_default = %s")


def tool_definitions(session_id: uuid.UUID) -> list[dict[str, Any]]:
    """Exactly what the in-process path offers the session's default chat."""
    return offered(catalog_for_chat(default_chat(session_id)))[0]


# Snapshot (by identity) -> (the snapshot, its definitions as MCP has them, those as MCP Tools):
# a chat's snapshot is kept while its rows are unchanged, and so is what `tools/list` makes of it.
_OFFERED = LruCache(1024)


def offered(snapshot: CatalogSnapshot) -> tuple[list[dict[str, Any]], list[types.Tool]]:
    kept = _OFFERED.get(id(snapshot))
    if kept is None or kept[0] is not snapshot:
        definitions = [{k: v for k, v in d.items() if k not in AHP_ONLY_KEYS} for d in snapshot.definitions]
        kept = _OFFERED.put(id(snapshot), (snapshot, definitions, [types.Tool.model_validate(d) for d in definitions]))
    return kept[1:]


def turn_for_call(endpoint: OpenEndpoint) -> Turn:
    """The turn a call runs in: the default chat's active turn when the caller may act in it,
    else one the host begins, sent by the caller."""
    while True:
        turn = running_turn(endpoint.session_id)
        if turn is not None:
            if endpoint.for_agent or turn.sender_id == endpoint.person_id:
                return turn
            if (turn.client_id == actions.ENDPOINT_TURN_CLIENT_ID
                    and actions.do_end_quiet_endpoint_turn(turn.pk, 0) is None):
                continue  # another person's attached agent, with no call open: its turn is over
            raise Refused(ANOTHER_PERSONS_TURN, "conflict")
        if endpoint.for_agent:
            raise Refused(NO_TURN_FOR_AGENT, "conflict")
        chat = default_chat(endpoint.session_id)
        if endpoint.person_id is None:
            principal = Principal.root(chat.session.tenant)
        else:
            from django.contrib.auth import get_user_model

            principal = Principal.for_person(chat.session.tenant, get_user_model().objects.get(pk=endpoint.person_id))
        try:
            actions.do_start_turn(principal, chat, uuid.uuid4(), TURN_TEXT, actions.ENDPOINT_TURN_CLIENT_ID)
        except Refused as refusal:
            if refusal.kind != "conflict":
                raise
        # Read back as any running turn, whoever began it first.


# Turns this process watches until they are quiet, each by one task on the serving loop.
_watched: dict[uuid.UUID, asyncio.Task] = {}


def watch_until_quiet(turn_id: uuid.UUID) -> None:
    task = _watched.get(turn_id)
    if task is None or task.done() or task.get_loop() is not asyncio.get_running_loop():
        _watched[turn_id] = asyncio.get_running_loop().create_task(end_when_quiet(turn_id))


async def end_when_quiet(turn_id: uuid.UUID) -> None:
    """End the host's turn for an attached agent once it is quiet. Every process that served one
    of its calls watches it and asks the rows, so it ends whichever process served its last call;
    a process that died with it is left to the sweep of abandoned turns."""
    wait: float | None = QUIET_TURN_SECONDS
    try:
        while wait is not None:
            await asyncio.sleep(wait)
            try:
                wait = await database_sync_to_async(actions.do_end_quiet_endpoint_turn)(turn_id, QUIET_TURN_SECONDS)
            except DATABASE_DOWN as exc:
                logger.warning("Turn %s ends when the database answers (%s: %s)", turn_id, exc.__class__.__name__, exc)
                wait = QUIET_TURN_SECONDS
    except Exception:
        logger.exception("Could not end the quiet turn %s", turn_id)
    finally:
        if _watched.get(turn_id) is asyncio.current_task():
            del _watched[turn_id]


# The MCP server ----------------------------------------------------------------------------------

server = Server("ahp-host", instructions="The tools of one AHP session's default chat.")


def current_endpoint() -> OpenEndpoint:
    return server.request_context.request.scope["ahp.endpoint"]  # type: ignore[union-attr]  # set for every call


def tools_to_list(session_id: uuid.UUID) -> list[types.Tool]:
    return offered(catalog_for_chat(default_chat(session_id)))[1]


async def list_tools(request: types.ListToolsRequest) -> types.ServerResult:
    tools = await database_sync_to_async(tools_to_list)(current_endpoint().session_id)
    return types.ServerResult(types.ListToolsResult(tools=tools))


async def call_tool(request: types.CallToolRequest) -> types.ServerResult:
    result = await call_at_home(current_endpoint(), request.params.name, request.params.arguments or {}, run_call)
    return types.ServerResult(mcp_result(result))


async def run_call(endpoint: OpenEndpoint, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """The call's AHP result, run here: this process is its session's home (ahp.mcp.at_home)."""
    try:
        turn = await database_sync_to_async(turn_for_call)(endpoint)
    except Refused as refusal:
        return actions.failure(name, refusal.sentence)
    try:
        return await ChatToolbox(turn).execute(None, name, arguments)
    finally:
        if turn.client_id == actions.ENDPOINT_TURN_CLIENT_ID:
            watch_until_quiet(turn.pk)


# Registered directly: the SDK's decorators would keep a per-process tool cache shared by every
# session and re-validate input the catalog already checks, with its own wording.
server.request_handlers[types.ListToolsRequest] = list_tools
server.request_handlers[types.CallToolRequest] = call_tool
INITIALIZATION_OPTIONS = server.create_initialization_options()  # after the handlers: it reads them


def error_result(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], isError=True)
answer_calls_with(run_call)


def mcp_result(result: dict[str, Any]) -> types.CallToolResult:
    """An AHP ToolCallResult as the MCP CallToolResult it mirrors."""
    content: list[types.ContentBlock] = []
    for item in result.get("content") or ():
        if item.get("type") == "text":
            content.append(types.TextContent(type="text", text=item["text"]))
        elif item.get("type") == "embeddedResource":
            content.append(types.EmbeddedResource(type="resource", resource=types.BlobResourceContents(
                uri=item.get("uri", "ahp-embedded:/"), blob=item["data"], mimeType=item.get("contentType"))))
        elif item.get("type") == "resource" and item.get("uri"):
            content.append(types.ResourceLink(type="resource_link", uri=item["uri"], name=item["uri"],
                                              mimeType=item.get("contentType")))
    if not content and not result.get("success"):
        content.append(types.TextContent(type="text", text=(result.get("error") or {}).get("message", "")))
    return types.CallToolResult(content=content, structuredContent=result.get("structuredContent"),
                                isError=not result.get("success"))


async def serve_mcp(scope: Scope, receive: Receive, send: Send) -> None:
    """One stateless streamable-HTTP exchange through the SDK's transport and server."""
    transport = StreamableHTTPServerTransport(mcp_session_id=None, is_json_response_enabled=True)

    async def run_server(*, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        async with transport.connect() as (read_stream, write_stream):
            task_status.started()
            await server.run(read_stream, write_stream, INITIALIZATION_OPTIONS, stateless=True)

    async with anyio.create_task_group() as tasks:
        await tasks.start(run_server)
        try:
            await transport.handle_request(scope, receive, send)
        finally:
            with anyio.CancelScope(shield=True):
                await transport.terminate()


# The ASGI app ------------------------------------------------------------------------------------

def rpc_error(request_id: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


async def read_body(receive: Receive) -> bytes | Literal[False] | None:
    """The whole body, None when the client left, or False once it passes MAX_BODY_BYTES (the
    rest is never read)."""
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            return False
        chunks.append(chunk)
        if not message.get("more_body"):
            return b"".join(chunks)


def parse_body(body: bytes) -> Any:
    """The JSON-RPC message in `body`, or BadFrame: the socket's frame rules, and nesting too
    deep for the parser itself is refused as too deep (-32600), not as unreadable."""
    try:
        return frames.parse(body.decode("utf-8"))
    except UnicodeDecodeError:
        raise frames.BadFrame(errors.PARSE_ERROR, frames.NOT_JSON) from None
    except frames.BadFrame as bad:
        if bad.code == errors.PARSE_ERROR and too_deep_to_parse(body):
            raise frames.BadFrame(errors.INVALID_REQUEST, frames.TOO_DEEP) from None
        raise


def too_deep_to_parse(body: bytes) -> bool:
    try:
        json.loads(body)
    except RecursionError:
        return True
    except ValueError:
        return False
    return False


def declared_length(scope: Scope) -> int:
    try:
        return int(header(scope, b"content-length") or 0)
    except ValueError:
        return 0


def replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


def session_id_of(path: str) -> uuid.UUID | None:
    raw = path[len(PATH_PREFIX):].strip("/")
    try:
        return uuid.UUID(raw)
    except ValueError:
        return None


async def tools_endpoint_app(scope: Scope, receive: Receive, send: Send) -> None:
    # This loop serves for as long as the process does: what a call publishes is sent from it
    # (no ORM thread waits on the channel layer), the turns it begins are this process's, and
    # so are the requests other processes hand it for the sessions it is home to.
    serve_from(asyncio.get_running_loop())
    keep_process_alive()
    homes.ensure_serving(methods.AT_HOME)
    if scope["method"] != "POST":
        # Stateless: there is no stream to GET and no session to DELETE.
        await send_json(send, 405, rpc_error(None, errors.INVALID_REQUEST, NOT_POST), [(b"allow", b"POST")])
        return
    token = token_from_headers(header(scope, b"authorization"))
    if not token:
        await send_json(send, 401, rpc_error(None, -32001, WRONG_TOKEN), [(b"www-authenticate", b"Bearer")])
        return
    if declared_length(scope) > MAX_BODY_BYTES:
        await send_json(send, 413, rpc_error(None, errors.INVALID_REQUEST, TOO_LARGE))
        return
    session_id = session_id_of(scope["path"])
    endpoint = None
    if session_id is not None:
        endpoint = await checked_endpoint(session_id, token)
    if endpoint is None:
        # A token that is not this endpoint's own (or no longer any person's) is answered exactly
        # as where there is no endpoint: no token can tell which sessions (of any tenant) exist.
        await send_json(send, 404, rpc_error(None, -32600, NO_ENDPOINT))
        return
    body = await read_body(receive)
    if body is None:
        return
    if body is False:
        await send_json(send, 413, rpc_error(None, errors.INVALID_REQUEST, TOO_LARGE))
        return
    try:
        message = parse_body(body)
    except frames.BadFrame as bad:
        await send_json(send, 400, rpc_error(bad.request_id, bad.code, bad.message))
        return
    if isinstance(message, dict) and "id" in message and message.get("method") not in ANSWERED_METHODS:
        await send_json(send, 200, rpc_error(message["id"], -32601, f"Method not found: {message.get('method')}"))
        return
    await serve_mcp({**scope, "ahp.endpoint": endpoint}, replay(body, receive), send)


def with_tools_endpoint(django_app: App) -> App:
    """The host's HTTP app: paths under /ahp-mcp/ go to the tools endpoint, the rest to Django."""

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            remember_listener(scope)
            if scope["path"].startswith(PATH_PREFIX):
                await tools_endpoint_app(scope, receive, send)
                return
        await django_app(scope, receive, send)

    return app
