"""The ASGI shapes the host's own apps pass around (plain mappings, as servers hand them), and
the two things those apps do with them by hand: read a request header, answer with JSON."""
import json
from collections.abc import Awaitable, Callable, Iterable, Mapping, MutableMapping
from typing import Any

Scope = dict[str, Any]  # a connection's scope
Message = MutableMapping[str, Any]  # an event received
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Mapping[str, Any]], Awaitable[None]]  # takes any event, so it serves where a narrower one is asked for
App = Callable[[Scope, Receive, Send], Awaitable[None]]


def header(scope: Scope, name: bytes) -> str:
    """The request's header `name` (lower case), or ""."""
    for key, value in scope.get("headers") or ():
        if key == name:
            return value.decode("latin-1")
    return ""


async def send_json(send: Send, status: int, payload: Any, headers: Iterable[tuple[bytes, bytes]] = ()) -> None:
    body = json.dumps(payload).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            *headers]})
    await send({"type": "http.response.body", "body": body})
