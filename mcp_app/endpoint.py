"""The per-session MCP tools endpoint, `/ahp-mcp/<session uuid>`, mounted beside Django.

Built on the official `mcp` SDK: its low-level Server answers `initialize`, `tools/list` and
`tools/call` (and `ping`, which every MCP peer must answer) over streamable HTTP, stateless
with JSON responses, so any worker process can serve any request. Before the SDK sees a
request, this module finds the session's open endpoint (404 when there is none), checks the
bearer token is that endpoint's own (401 otherwise) and answers -32601 for any other method.

What a call is attached to: `tools/call` runs through `tools_app.runtime.ChatToolbox` on the
session's default chat, exactly as an in-process agent's call does. When that chat has an
active turn (an agent answering a person, as the `acp` provider does), the call joins it and
acts as that turn's sender. Otherwise the host begins a turn for the out-of-process agent,
sent by whoever opened the endpoint, and ends it once none of its calls is still open.
"""
import json
import os
import uuid
from dataclasses import dataclass

import anyio
from channels.db import database_sync_to_async
from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.streamable_http import StreamableHTTPServerTransport

from grants.authentication import token_from_headers
from grants.models import Principal
from sessions_app import actions
from sessions_app.models import Chat, ToolCall, Turn
from tools_app.loader import catalog_for_chat
from tools_app.runtime import ChatToolbox

from .models import ToolsEndpoint

PATH_PREFIX = "/ahp-mcp/"
WRONG_TOKEN = "This tools server answers only its own session's token"
NO_ENDPOINT = "There is no open tools endpoint here."
ANSWERED_METHODS = frozenset({"initialize", "tools/list", "tools/call", "ping"})
TURN_CLIENT_ID = "ahp-mcp"
TURN_TEXT = "Tool calls from an agent attached to the session's MCP tools endpoint"
# MCP's ToolDefinition has no AHP-only keys.
AHP_ONLY_KEYS = ("availability",)

# The address of the listener this process last served HTTP on, for agents the host starts.
LISTENER = {}


@dataclass(frozen=True)
class OpenEndpoint:
    session_id: uuid.UUID
    tenant_id: int
    opened_by_id: int | None


# Rows ------------------------------------------------------------------------------------------

def open_endpoint(session_id, token):
    """(endpoint or None, token accepted)."""
    row = ToolsEndpoint.objects.select_related("session").filter(session_id=session_id).first()
    if row is None:
        return None, False
    return OpenEndpoint(row.session_id, row.session.tenant_id, row.opened_by_id), row.accepts(token)


def default_chat(session_id):
    return Chat.objects.select_related("session__tenant").get(session_id=session_id, is_default=True)


def tool_definitions(session_id):
    """Exactly what the in-process path offers the session's default chat."""
    snapshot = catalog_for_chat(default_chat(session_id))
    return [{k: v for k, v in d.items() if k not in AHP_ONLY_KEYS} for d in snapshot.definitions]


def turn_for_call(endpoint):
    """The default chat's active turn, or one the host begins for the attached agent."""
    chat = default_chat(endpoint.session_id)
    while True:
        turn = (Turn.objects.select_related("chat__session__tenant", "sender")
                .filter(chat=chat, state="active").order_by("started").first())
        if turn is not None:
            return turn
        if endpoint.opened_by_id is None:
            principal = Principal.root(chat.session.tenant)
        else:
            from django.contrib.auth import get_user_model

            principal = Principal.for_person(chat.session.tenant, get_user_model().objects.get(pk=endpoint.opened_by_id))
        try:
            started = actions.do_start_turn(principal, chat, uuid.uuid4(), TURN_TEXT, TURN_CLIENT_ID)
        except actions.Refused as refusal:
            if refusal.kind != "conflict":
                raise
            continue  # another call began one first: join it
        return Turn.objects.select_related("chat__session__tenant", "sender").get(pk=started.pk)


def end_host_turn_when_idle(turn_id):
    turn = Turn.objects.filter(pk=turn_id, client_id=TURN_CLIENT_ID, state="active").first()
    if turn is not None and not ToolCall.objects.filter(turn=turn, completed__isnull=True).exists():
        actions.do_end_turn(turn.pk, response_text=None)


# The MCP server ----------------------------------------------------------------------------------

server = Server("ahp-host", instructions="The tools of one AHP session's default chat.")


def current_endpoint():
    return server.request_context.request.scope["ahp.endpoint"]


async def list_tools(request):
    definitions = await database_sync_to_async(tool_definitions)(current_endpoint().session_id)
    return types.ServerResult(types.ListToolsResult(tools=[types.Tool.model_validate(d) for d in definitions]))


async def call_tool(request):
    endpoint = current_endpoint()
    name, arguments = request.params.name, request.params.arguments or {}
    try:
        turn = await database_sync_to_async(turn_for_call)(endpoint)
    except actions.Refused as refusal:
        return types.ServerResult(error_result(refusal.sentence))
    toolbox = ChatToolbox(turn)
    try:
        result = await toolbox.execute(await toolbox.snapshot(), name, arguments)
    finally:
        await database_sync_to_async(end_host_turn_when_idle)(turn.pk)
    return types.ServerResult(mcp_result(result))


# Registered directly: the SDK's decorators would keep a per-process tool cache shared by every
# session and re-validate input the catalog already checks, with its own wording.
server.request_handlers[types.ListToolsRequest] = list_tools
server.request_handlers[types.CallToolRequest] = call_tool
INITIALIZATION_OPTIONS = server.create_initialization_options()  # after the handlers: it reads them


def error_result(text):
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], isError=True)


def mcp_result(result):
    """An AHP ToolCallResult as the MCP CallToolResult it mirrors."""
    content = []
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


async def serve_mcp(scope, receive, send):
    """One stateless streamable-HTTP exchange through the SDK's transport and server."""
    transport = StreamableHTTPServerTransport(mcp_session_id=None, is_json_response_enabled=True)

    async def run_server(*, task_status=anyio.TASK_STATUS_IGNORED):
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

async def send_json(send, status, payload, headers=()):
    body = json.dumps(payload).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            *headers]})
    await send({"type": "http.response.body", "body": body})


def rpc_error(request_id, code, message):
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


async def read_body(receive):
    chunks = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)


def replay(body, receive):
    sent = False

    async def replayed():
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


def session_id_of(path):
    raw = path[len(PATH_PREFIX):].strip("/")
    try:
        return uuid.UUID(raw)
    except ValueError:
        return None


def header(scope, name):
    for key, value in scope.get("headers") or ():
        if key == name:
            return value.decode("latin-1")
    return ""


async def tools_endpoint_app(scope, receive, send):
    token = token_from_headers(header(scope, b"authorization"))
    if not token:
        await send_json(send, 401, rpc_error(None, -32001, WRONG_TOKEN), [(b"www-authenticate", b"Bearer")])
        return
    session_id = session_id_of(scope["path"])
    endpoint, accepted = (None, False)
    if session_id is not None:
        endpoint, accepted = await database_sync_to_async(open_endpoint)(session_id, token)
    if endpoint is None or not accepted:
        # A token that is not this endpoint's own is answered exactly as where there is no
        # endpoint: no token can tell which sessions (of any tenant) exist.
        await send_json(send, 404, rpc_error(None, -32600, NO_ENDPOINT))
        return
    if scope["method"] == "POST":
        body = await read_body(receive)
        if body is None:
            return
        try:
            message = json.loads(body)
        except ValueError:
            message = None
        if isinstance(message, dict) and "id" in message and message.get("method") not in ANSWERED_METHODS:
            await send_json(send, 200, rpc_error(message["id"], -32601, f"Method not found: {message.get('method')}"))
            return
        receive = replay(body, receive)
    await serve_mcp({**scope, "ahp.endpoint": endpoint}, receive, send)


def remember_listener(scope):
    server_address = scope.get("server")
    if server_address and server_address[1]:
        LISTENER["base"] = f"{scope.get('scheme', 'http')}://{server_address[0]}:{server_address[1]}"


def base_url():
    """Where agents the host starts reach this host: AHP_MCP_BASE_URL, else the listener this
    process last served HTTP on, else runhost's HOST and PORT."""
    configured = os.environ.get("AHP_MCP_BASE_URL")
    if configured:
        return configured.rstrip("/")
    if "base" in LISTENER:
        return LISTENER["base"]
    return f"http://{os.environ.get('HOST', '127.0.0.1')}:{os.environ.get('PORT', '8000')}"


def with_tools_endpoint(django_app):
    """The host's HTTP app: paths under /ahp-mcp/ go to the tools endpoint, the rest to Django."""

    async def app(scope, receive, send):
        if scope["type"] == "http":
            remember_listener(scope)
            if scope["path"].startswith(PATH_PREFIX):
                await tools_endpoint_app(scope, receive, send)
                return
        await django_app(scope, receive, send)

    return app
