"""Asking a connected client something (a JSON-RPC `resourceRead` over its own socket). The
client's socket may live in another process, so the question and its answer travel through the
channel layer, to the socket's channel its connection's row names (a socket joins no group for
it: on Redis that was a SUBSCRIBE and an UNSUBSCRIBE per socket); the asker waits with a timeout
that is itself a message, so no channel-layer receive is ever cancelled."""
import asyncio
import base64
import json

from channels.layers import get_channel_layer

from kernel.orm import database_sync_to_async
from sessions_app.models import ClientConnection

CLIENT_ANSWER_SECONDS = 10


def client_channels(tenant_id, client_id, owner_id):
    """The channels of the open sockets of `owner_id`'s client `client_id` (None: the tenant's
    root): another person using the same client id is never asked."""
    return list(ClientConnection.objects.filter(tenant_id=tenant_id, client_id=client_id, person_id=owner_id)
                .exclude(channel="").values_list("channel", flat=True))


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
    channels = await database_sync_to_async(client_channels)(tenant_id, client_id, owner_id)
    if not channels:
        return False, f"{client_id} is not connected"
    layer = get_channel_layer()
    reply_to = await layer.new_channel()
    question = {"type": "ahp.server_request", "method": "resourceRead",
                "params": {"channel": "ahp-root://", "uri": uri}, "reply_to": reply_to}
    for channel in channels:
        await layer.send(channel, question)
    loop = asyncio.get_running_loop()
    timer = loop.call_later(timeout, lambda: loop.create_task(layer.send(reply_to, {"type": "timeout"})))
    try:
        answer = await layer.receive(reply_to)
    finally:
        timer.cancel()
        if hasattr(layer, "delete_channel"):  # the Redis layer keeps a reply channel until it is deleted
            await layer.delete_channel(reply_to)
    if answer.get("type") == "timeout":
        return False, f"{client_id} did not answer within {timeout:g} s"
    if "error" in answer:
        return False, f"{client_id} answered: {(answer['error'] or {}).get('message', 'an error')}"
    return True, answer_text(answer.get("result"))
