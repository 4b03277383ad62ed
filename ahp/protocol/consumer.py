"""The AHP WebSocket endpoint: JSON-RPC 2.0, one message per text frame."""
import json
import logging
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer

from grants.authentication import token_from_headers
from grants.models import ApiToken

from . import errors

logger = logging.getLogger(__name__)

SUPPORTED_VERSIONS = ("1.0",)
SERVER_INFO = {"name": "ahp-host", "version": "0.1.0"}


def token_from_scope(scope):
    """The token on the upgrade: `?tkn=` in the query string or `Authorization: Bearer`."""
    query = parse_qs(scope.get("query_string", b"").decode())
    if query.get("tkn"):
        return query["tkn"][0]
    headers = dict(scope.get("headers", []))
    return token_from_headers(headers.get(b"authorization", b"").decode())


class AhpConsumer(AsyncWebsocketConsumer):
    async def connect(self):
        token = await database_sync_to_async(ApiToken.authenticate)(token_from_scope(self.scope))
        if token is None:
            await self.close(code=4401)
            return
        self.principal = await database_sync_to_async(token.principal)()
        self.client_id = None
        await self.accept()

    async def receive(self, text_data=None, bytes_data=None):
        if text_data is None:
            await self.send_error(None, errors.INVALID_REQUEST, "AHP messages are text frames.")
            return
        try:
            message = json.loads(text_data)
        except ValueError:
            await self.send_error(None, errors.PARSE_ERROR, "Parse error: the frame is not JSON.")
            return
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0" or not isinstance(message.get("method"), str):
            request_id = message.get("id") if isinstance(message, dict) else None
            await self.send_error(request_id, errors.INVALID_REQUEST, "Invalid request: not a JSON-RPC 2.0 message.")
            return
        request_id = message.get("id")
        params = message.get("params", {})
        try:
            if not isinstance(params, dict):
                raise errors.RpcError(errors.INVALID_PARAMS, "params must be an object.")
            result = await self.dispatch_method(message["method"], params)
        except errors.RpcError as exc:
            if request_id is not None:
                await self.send_error(request_id, exc.code, exc.message, exc.data)
            return
        if request_id is not None:
            await self.send_json({"jsonrpc": "2.0", "id": request_id, "result": result})

    async def dispatch_method(self, method, params):
        if method != "initialize" and self.client_id is None:
            raise errors.RpcError(errors.INVALID_REQUEST, f"{method} before initialize: send initialize first.")
        handler = getattr(self, f"rpc_{method}", None)
        if handler is None:
            raise errors.RpcError(errors.METHOD_NOT_FOUND, f"Method not found: {method}")
        return await handler(params)

    async def rpc_initialize(self, params):
        versions = errors.require(params, "protocolVersions", list)
        client_id = errors.require(params, "clientId", str)
        chosen = next((v for v in versions if v in SUPPORTED_VERSIONS), None)
        if chosen is None:
            raise errors.RpcError(
                errors.UNSUPPORTED_PROTOCOL_VERSION,
                "No protocol version both sides speak.",
                {"supportedVersions": list(SUPPORTED_VERSIONS)},
            )
        self.client_id = client_id
        return {"protocolVersion": chosen, "serverSeq": 0, "serverInfo": SERVER_INFO, "snapshots": []}

    async def rpc_ping(self, params):
        return None

    async def send_json(self, payload):
        await self.send(text_data=json.dumps(payload))

    async def send_error(self, request_id, code, message, data=None):
        error = {"code": code, "message": message}
        if data is not None:
            error["data"] = data
        await self.send_json({"jsonrpc": "2.0", "id": request_id, "error": error})
