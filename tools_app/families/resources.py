"""`ahp_resource`: read what a URI names, the host's own channels and tool outputs, or a
resource a connected client publishes, which the host asks that client for with a JSON-RPC
`resourceRead` request over its socket. The client's socket may live in another process, so
the question and its answer travel through the channel layer; the asker waits with a timeout
that is itself a message, so no channel-layer receive is ever cancelled."""
import asyncio
import base64
import hashlib
import json

from channels.db import database_sync_to_async
from channels.layers import get_channel_layer

from kernel.refusals import Refused
from sessions_app import state
from sessions_app.channels import parse
from sessions_app.models import ActiveClient, Chat, Session, ToolCall
from tools_app.catalog.registry import Tool

from .comments.models import Annotation

CLIENT_ANSWER_SECONDS = 10
TOOL_OUTPUT_PREFIX = "ahp-tool-output:/"


def client_group(tenant_id, client_id, owner_id):
    """The channel-layer group every connection of one person's client joins (ids may hold any
    character): another person using the same client id never hears what is asked of it."""
    digest = hashlib.sha256(f"{tenant_id}:{owner_id or 'root'}:{client_id}".encode()).hexdigest()[:40]
    return f"client.{digest}"


def annotations_state(session):
    rows = Annotation.objects.filter(session=session).order_by("created", "pk")
    return {"annotations": [row.to_wire() for row in rows]}


def read_host_resource(principal, uri):
    """The text of a resource the host itself holds, or None when the URI is not the host's."""
    visible = Session.objects.visible_to(principal)
    kind, key = parse(uri)
    if kind in ("session", "annotations"):
        session = visible.filter(id=key).first()
        if session is None:
            raise Refused(f"No resource {uri} here.")
        return json.dumps(state.session_state(session) if kind == "session" else annotations_state(session), indent=1)
    if kind == "chat":
        chat = Chat.objects.filter(id=key, session__in=visible).first()
        if chat is None:
            raise Refused(f"No resource {uri} here.")
        return json.dumps(state.chat_state(chat), indent=1)
    if isinstance(uri, str) and uri.startswith(TOOL_OUTPUT_PREFIX):
        call = ToolCall.objects.filter(id__in=[uri[len(TOOL_OUTPUT_PREFIX):]] if _is_uuid(uri[len(TOOL_OUTPUT_PREFIX):])
                                       else [], turn__chat__session__in=visible).first()
        if call is None or call.result is None:
            raise Refused(f"No resource {uri} here.")
        from tools_app.models import FullToolOutput
        from tools_app.catalog.bounding import result_text

        full = FullToolOutput.objects.filter(call=call).first()
        return full.text if full else result_text(call.result)
    return None


def _is_uuid(text):
    import uuid

    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True


def answer_text(result):
    """The text of a client's resourceRead result: {data, encoding?} or MCP-like {contents}/{text}."""
    if not isinstance(result, dict):
        return json.dumps(result)
    if isinstance(result.get("data"), str):
        if result.get("encoding") == "base64":
            return base64.b64decode(result["data"]).decode(errors="replace")
        return result["data"]
    if isinstance(result.get("text"), str):
        return result["text"]
    contents = result.get("contents")
    if isinstance(contents, list):
        return "\n".join(c.get("text", "") for c in contents if isinstance(c, dict))
    return json.dumps(result)


async def ask_client(tenant_id, client_id, uri, timeout=CLIENT_ANSWER_SECONDS, *, owner_id):
    """Ask one client (the connections of `owner_id`, who announced it) for `uri`: (True, text)
    or (False, why not)."""
    layer = get_channel_layer()
    reply_to = await layer.new_channel()
    await layer.group_send(client_group(tenant_id, client_id, owner_id), {
        "type": "ahp.server_request", "method": "resourceRead",
        "params": {"channel": "ahp-root://", "uri": uri}, "reply_to": reply_to})
    loop = asyncio.get_running_loop()
    timer = loop.call_later(timeout, lambda: loop.create_task(layer.send(reply_to, {"type": "timeout"})))
    try:
        answer = await layer.receive(reply_to)
    finally:
        timer.cancel()
    if answer.get("type") == "timeout":
        return False, f"{client_id} did not answer within {timeout:g} s"
    if "error" in answer:
        return False, f"{client_id} answered: {(answer['error'] or {}).get('message', 'an error')}"
    return True, answer_text(answer.get("result"))


async def ahp_resource(context, arguments):
    uri = arguments["uri"]
    text = await database_sync_to_async(read_host_resource)(context.principal, uri)
    if text is not None:
        return text
    clients = await database_sync_to_async(
        lambda: list(ActiveClient.objects.filter(session=context.session).order_by("id")
                     .values_list("client_id", "owner_id"))
    )()
    reasons = []
    for client_id, owner_id in clients:
        ok, text = await ask_client(context.session.tenant_id, client_id, uri, owner_id=owner_id)
        if ok:
            return text
        reasons.append(text)
    if not clients:
        raise Refused(f"No resource {uri}: it is not the host's, and no client of this session publishes resources.")
    raise Refused(f"No resource {uri}: " + "; ".join(reasons) + ".")


RESOURCE_TOOLS = (
    Tool("ahp_resource", title="Read Resource",
         description=("Read a resource by URI: this host's sessions, chats, annotations and tool outputs, or a "
                      "resource a connected client of this session publishes."),
         input_schema={"type": "object", "properties": {"uri": {"type": "string", "minLength": 1}}, "required": ["uri"]},
         executor=ahp_resource, annotations={"readOnlyHint": True}, effects=frozenset({"reads"})),
)
