"""AHP's JSON-RPC error codes, and the one exception handlers raise to answer with one."""
from typing import Any

Params = dict[str, Any]  # a request's params (or a handler's result): a JSON object

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
NO_AGENT_FOR_PROVIDER = -32002
SESSION_ALREADY_EXISTS = -32003
UNSUPPORTED_PROTOCOL_VERSION = -32005
AUTH_REQUIRED = -32007
NOT_FOUND = -32008
PERMISSION_DENIED = -32009
ALREADY_EXISTS = -32010
CONFLICT = -32011


class RpcError(Exception):
    """`closes`: the WebSocket close code the connection ends with once the error is sent (the
    protocol closes it after -32005), or None to keep it open."""

    def __init__(self, code: int, message: str, data: Any = None, closes: int | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data
        self.closes = closes


def initialized(client_id: str | None) -> str:
    """The client a connection initialized as: every method but a few runs only after initialize."""
    if client_id is None:
        raise RpcError(INVALID_REQUEST, "This connection is not initialized: send initialize first.")
    return client_id


def valid_id(request_id: Any) -> bool:
    """JSON-RPC 2.0: an id is a string, a number or null (never an object, an array or a boolean)."""
    return request_id is None or isinstance(request_id, str) or (
        isinstance(request_id, (int, float)) and not isinstance(request_id, bool))


_TYPE_WORDS = {str: "a string", list: "an array", dict: "an object", int: "a number", bool: "a boolean"}


def require(params: Params, name: str, kind: type) -> Any:
    """params[name], which must be present and of `kind`; otherwise -32602 naming the field."""
    if name not in params:
        raise RpcError(INVALID_PARAMS, f"Invalid params: {name} is required.")
    value = params[name]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise RpcError(INVALID_PARAMS, f"Invalid params: {name} must be {_TYPE_WORDS[kind]}.")
    return value
