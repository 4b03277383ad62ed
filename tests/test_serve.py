"""The production server (`python -m ahp.serve`) over raw sockets: a client that drips its
request is cut off at the request deadline; one that sent its request is not."""
import socket
import time

import pytest

from .ahp.protocol.harness import AhpClient
from .conftest import production_server

pytestmark = pytest.mark.e2e  # a daphne process

DEADLINE = 2.0


@pytest.fixture
def server(transactional_db):
    with production_server(AHP_REQUEST_DEADLINE_SECONDS=str(DEADLINE)) as port:
        yield port


def held_open(sock, drip, limit=10 * DEADLINE):
    """Send `drip` a byte every 0.2 s; answer how long the server kept the connection open
    (None: still open after `limit` seconds)."""
    started = time.monotonic()
    sock.settimeout(0.2)
    for byte in drip:
        if time.monotonic() - started > limit:
            return None
        try:
            sock.sendall(bytes([byte]))
            if sock.recv(1024) == b"":
                return time.monotonic() - started
        except TimeoutError:
            continue
        except (ConnectionResetError, BrokenPipeError):
            return time.monotonic() - started
    return None


def test_a_websocket_handshake_dripping_its_headers_is_cut_off_at_the_deadline(server):
    head = b"GET /ahp HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nX-Padding: "
    with socket.create_connection(("127.0.0.1", server)) as sock:
        held = held_open(sock, head * 100)
    assert held is not None and DEADLINE * 0.9 <= held < DEADLINE + 3


def test_a_request_dripping_its_body_is_cut_off_at_the_deadline(server):
    head = b"POST /api/v1/config HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100000\r\n\r\n"
    with socket.create_connection(("127.0.0.1", server)) as sock:
        sock.sendall(head)
        held = held_open(sock, b"x" * 100_000)
    assert held is not None and held < DEADLINE + 3


def test_a_prompt_request_is_answered_and_a_websocket_outlives_the_deadline(acme, server):
    with socket.create_connection(("127.0.0.1", server), timeout=10) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        assert sock.recv(1024).startswith(b"HTTP/1.1 200")
    with AhpClient(server, acme.tokens["member"]) as client:
        time.sleep(DEADLINE * 2)
        assert client.call("ping", {"channel": "ahp-root://"}) is None


def test_autobahns_debug_lines_are_formatted_only_while_they_are_written():
    """What the server skips formatting per connection and per frame still reaches an operator
    who turns autobahn's debug logging on."""
    import txaio
    from autobahn.websocket import protocol

    import ahp.serve  # noqa: F401 (its import is what wraps autobahn's formatting)

    config = [("openHandshakeTimeout", 5, "WebSocketServerFactory")]
    assert protocol.pformat(config) == "(not formatted: autobahn's debug logging is off)"
    level = txaio.get_global_log_level()
    txaio.set_global_log_level("debug")
    try:
        assert protocol.pformat(config) == "[('openHandshakeTimeout', 5, 'WebSocketServerFactory')]"
        assert "42" in protocol.hlval(42)
    finally:
        txaio.set_global_log_level(level)
