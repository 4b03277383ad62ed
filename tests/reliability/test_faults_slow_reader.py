"""A WebSocket client that stops reading is dropped once UNREAD_BYTES wait for it, rather than
kept in the serving process's memory without bound; nobody else notices, and it comes back with
a new connection."""
import base64
import json
import os
import socket
import time

from ahp.deployment import UNREAD_BYTES

from ..ahp.protocol.harness import INIT_VERSION, AhpClient, default_chat

MESSAGE = "x" * 120_000  # each turn sends its subscribers this twice: turnStarted and the reply


class SilentReader:
    """A client that initializes, subscribes to `chat`, then reads nothing (a small receive buffer,
    so what it does not read waits on the server's side)."""

    def __init__(self, port, token, chat):
        self.socket = socket.socket()
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        self.socket.connect(("127.0.0.1", port))
        key = base64.b64encode(os.urandom(16)).decode()
        self.socket.sendall(f"GET /ahp?tkn={token} HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
                            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
                            .encode())
        self.socket.settimeout(10)
        head = b""
        while b"\r\n\r\n" not in head:
            head += self.socket.recv(1)
        assert head.startswith(b"HTTP/1.1 101")
        self.send({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                   "params": {"channel": "ahp-root://", "protocolVersions": [INIT_VERSION], "clientId": "asleep"}})
        self.send({"jsonrpc": "2.0", "id": 2, "method": "subscribe", "params": {"channel": chat}})

    def send(self, message):
        data, mask = json.dumps(message).encode(), os.urandom(4)
        length = bytes([0x80 | len(data)]) if len(data) < 126 else bytes([0x80 | 126]) + len(data).to_bytes(2, "big")
        self.socket.sendall(b"\x81" + length + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))

    def read_to_the_end(self):
        """Everything the server still sends before the connection ends; None if it never ends."""
        received = 0
        try:
            while chunk := self.socket.recv(1 << 20):
                received += len(chunk)
        except ConnectionResetError:
            pass
        except TimeoutError:
            return None
        return received


def test_a_client_that_stops_reading_is_dropped_and_nobody_else_notices(acme, live_server_process):
    port = live_server_process
    with AhpClient(port, acme.tokens["member"], "alice") as alice:
        chat = default_chat(alice, alice.create_session())
        alice.subscribe(chat)
        asleep = SilentReader(port, acme.tokens["member"], chat)
        time.sleep(1)  # its subscription is in
        turns = 2 * UNREAD_BYTES // (2 * len(MESSAGE))  # twice what it may leave unread
        for _ in range(turns):
            assert alice.reply_to(alice.start_turn(chat, MESSAGE), timeout=30) == MESSAGE
        received = asleep.read_to_the_end()
        # The connection ended, and what the server had kept for it went with it: it got no
        # more than the kernels' buffers held (several MiB at most), not what it was sent.
        assert received is not None and received < UNREAD_BYTES
        asleep.socket.close()
        assert alice.call("ping", {"channel": "ahp-root://"}) is None
    with AhpClient(port, acme.tokens["member"], "asleep") as awake:  # back, on a new connection
        assert awake.subscribe(chat)["turns"][-1]["message"]["text"] == MESSAGE
