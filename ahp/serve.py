"""`python -m ahp.serve`: daphne, exactly as `python -m daphne` runs it, except that

- it refuses to start without SECRET_KEY unless embedded on loopback, and with an AHP_SECRETS_KEY
  that cannot open the database's sealed secrets (ahp/deployment.py);
- a close frame carries the reason the application gave it (the connection quota's sentence);
- a frame over its size limit (1 MiB) is refused with close code 1009 ("message too big") rather
  than by dropping the TCP connection, so a client learns why it was cut off;
- a connection must finish sending each request's head and body (a WebSocket upgrade included)
  within REQUEST_DEADLINE seconds of opening or of its previous response. Twisted's own idle
  timeout restarts at every byte, so a client dripping a header a minute was held for ever;
- a WebSocket client that stops reading (a laptop asleep, a peer that only writes) is dropped
  once UNREAD_BYTES wait for it, rather than kept in the process's memory without bound (the
  reactor buffers every action of every channel it subscribed to); it catches up by `reconnect`;
- a WebSocket handshake may take HANDSHAKE_SECONDS: daphne's 5 s would drop a failure the
  handshake throttle slowed, with no refusal, on a loaded machine;
- a close's reason (the host's sentence: why a token or a version was refused) reaches the client;
  daphne sends the close code alone;
- with `--handoff-fd N` it listens on nothing and serves the connections the front
  (ahp/front.py) hands it over the Unix socket N, each with the bytes the front read of it.
"""
import asyncio
import logging
import os
import socket
import sys

import daphne.server
import django
import txaio
from daphne.access import AccessLogGenerator
from daphne.cli import DEFAULT_HOST, CommandLineInterface
from daphne.http_protocol import HTTPFactory
from daphne.ws_protocol import WebSocketFactory, WebSocketProtocol
from twisted.internet import reactor
from twisted.web.http import HTTPChannel

from ahp.deployment import (
    HANDOFF_BYTES,
    HANDSHAKE_SECONDS,
    REQUEST_DEADLINE,
    UNREAD_BYTES,
    refusal_to_start,
    secrets_key_refusal,
)
from ahp.internals import internal, patch, refuse_to_start_if_moved

_GenericHTTPChannelProtocol = internal("twisted.web.http._GenericHTTPChannelProtocol")

logger = logging.getLogger(__name__)


def unsent_bytes(transport):
    """What the reactor holds for a connection that the kernel has not taken yet (twisted's
    FileDescriptor buffers)."""
    return (len(getattr(transport, "dataBuffer", b"")) - getattr(transport, "offset", 0)
            + getattr(transport, "_tempDataLen", 0))


class ReaderBoundWebSocketProtocol(WebSocketProtocol):
    def serverSend(self, content, binary=False):
        if self.state == self.STATE_CLOSED:
            return  # the client left while news for it was on its way; it catches up by reconnect
        super().serverSend(content, binary)
        unsent = unsent_bytes(self.transport)
        if unsent > UNREAD_BYTES and self.state == self.STATE_OPEN:
            logger.warning("Dropping %s: it left %d bytes unread (over %d); it catches up by reconnect",
                           self.client_addr, unsent, UNREAD_BYTES)
            self.dropConnection(abort=True)

    def handle_reply(self, message: dict) -> None:
        """As daphne's, except that a close passes its reason on (daphne's drops it): a refused
        connection learns why, the connection quota's sentence among them."""
        if message.get("type") == "websocket.close" and self.state != self.STATE_CONNECTING:
            self.sendClose(code=message.get("code") or 1000, reason=message.get("reason") or None)
            return
        super().handle_reply(message)


class ClosingWebSocketFactory(WebSocketFactory):
    protocol = ReaderBoundWebSocketProtocol

    def setProtocolOptions(self, **options):
        super().setProtocolOptions(failByDrop=False, **options)


class DeadlineHTTPChannel(HTTPChannel):
    """An HTTP/1.1 connection closed when a request has not fully arrived by its deadline."""

    deadline = None

    def connectionMade(self):
        super().connectionMade()
        self.arm()

    def arm(self):
        self.deadline = self.callLater(REQUEST_DEADLINE, self.request_too_slow)

    def disarm(self):
        if self.deadline is not None and self.deadline.active():
            self.deadline.cancel()
        self.deadline = None

    def request_too_slow(self):
        self.deadline = None
        self._log.info("Closing {peer}: its request did not arrive within {s} s", peer=self.transport.getPeer(),
                       s=REQUEST_DEADLINE)
        self.transport.abortConnection()

    def allContentReceived(self):
        self.disarm()  # the request is in; what the application takes to answer is not the client's doing
        super().allContentReceived()

    def requestDone(self, request):
        super().requestDone(request)
        if self.persistent and self.deadline is None:
            self.arm()  # the next request on this connection gets its own deadline

    def connectionLost(self, reason):
        self.disarm()
        super().connectionLost(reason)


class DeadlineHTTPFactory(HTTPFactory):
    def protocol(self):
        # As twisted's own factory builds it (HTTP/1.1, switching to HTTP/2 on ALPN), around our channel.
        return _GenericHTTPChannelProtocol(DeadlineHTTPChannel())


def only_for_debug_lines(format_value):
    """`format_value`, run only while autobahn's debug lines are written; otherwise a placeholder."""
    def formatted(*args, **kwargs):
        if txaio.get_global_log_level() in ("debug", "trace"):
            return format_value(*args, **kwargs)
        return "(not formatted: autobahn's debug logging is off)"
    return formatted


# autobahn formats values for its debug lines whether they are written or not: its whole
# configuration on every connection (~120 us; with the rest, ~7% of a serving process's CPU while
# sockets open and close, py-spy under bench.churn) and three coloured values on every frame it
# sends (~8 us). A server formats them for nothing else; their other uses (a client's handshake
# error, the text of `Timings`, which a server keeps only when told to) are a client's.
for name in ("pformat", "hltype", "hlval"):
    path = f"autobahn.websocket.protocol.{name}"
    patch(path, only_for_debug_lines(internal(path)))

# daphne's Server builds its factories by these module-level names.
patch("daphne.server.WebSocketFactory", ClosingWebSocketFactory)
patch("daphne.server.HTTPFactory", DeadlineHTTPFactory)


class HandoffServer(daphne.server.Server):
    """daphne serving the connections handed over on the Unix socket `handoff_fd`, not listening."""

    handoff_fd = None

    def run(self):
        self.endpoints = []  # daphne's command line always names one; this server takes none
        reactor.callWhenRunning(self.take_handoffs)
        super().run()

    def take_handoffs(self):
        self.handoff = socket.socket(fileno=self.handoff_fd)
        self.handoff.setblocking(False)
        asyncio.get_event_loop().add_reader(self.handoff_fd, self.adopt_handed)
        self.handoff.send(b"r")  # the front hands this process connections from now on
        logging.getLogger(__name__).info("Serving the connections the front hands over")

    def adopt_handed(self):
        while True:
            try:
                data, fds, _, _ = socket.recv_fds(self.handoff, HANDOFF_BYTES, 4)
            except BlockingIOError:
                return
            if not data and not fds:  # the front has gone, and its serving processes with it
                asyncio.get_event_loop().remove_reader(self.handoff_fd)
                reactor.stop()
                return
            for fd in fds:
                with socket.socket(fileno=fd) as connection:
                    connection.setblocking(False)
                    try:  # the reactor takes a copy of the descriptor
                        transport = reactor.adoptStreamConnection(fd, connection.family, self.http_factory)
                    except OSError:  # the client left while it was handed over
                        continue
                transport.protocol.dataReceived(data)



class QuietAccessLog(AccessLogGenerator):
    """Daphne's access log without a line per static file or per MCP request that went well: a
    page load or an agent's tool calls would otherwise fill the terminal."""

    QUIET_PATHS = ("/static/", "/ahp-mcp/")

    def __call__(self, protocol: str, action: str, details: dict) -> None:
        if (protocol == "http" and str(details.get("path", "")).startswith(self.QUIET_PATHS)
                and int(details.get("status") or 0) < 400):
            return
        super().__call__(protocol, action, details)


class HostCommandLine(CommandLineInterface):
    """daphne's command line, its handshake deadline the host's (HANDSHAKE_SECONDS) unless told."""

    def __init__(self) -> None:
        super().__init__()
        self.parser.set_defaults(websocket_connect_timeout=HANDSHAKE_SECONDS)


def listening_hosts(argv):
    """The TCP hosts daphne's command line binds, or None when it names other endpoints."""
    args, _ = CommandLineInterface().parser.parse_known_args(argv)
    if args.unix_socket or args.file_descriptor is not None or args.socket_strings:
        return None
    return [args.host or DEFAULT_HOST]


def main(argv):
    refuse_to_start_if_moved()
    patch("daphne.cli.AccessLogGenerator", QuietAccessLog)  # the name daphne's command line builds its log with
    if "--handoff-fd" in argv:
        at = argv.index("--handoff-fd")
        HandoffServer.handoff_fd = int(argv[at + 1])
        HostCommandLine.server_class = HandoffServer
        # It would say "Starting server at" the address its command line defaults to, which it never listens on.
        logging.getLogger("daphne.cli").setLevel(logging.WARNING)
        argv = argv[:at] + argv[at + 2:]
    else:
        refusal = refusal_to_start(listening_hosts(argv))
        if not refusal:
            os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ahp.settings")
            django.setup()
            refusal = secrets_key_refusal()
        if refusal:
            sys.exit(refusal)
    HostCommandLine().run(argv)


if __name__ == "__main__":
    main(sys.argv[1:])
