"""`python -m ahp.serve`: daphne, exactly as `python -m daphne` runs it, except that

- it refuses to start without SECRET_KEY unless embedded on loopback (ahp/deployment.py);
- a frame over its size limit (1 MiB) is refused with close code 1009 ("message too big") rather
  than by dropping the TCP connection, so a client learns why it was cut off;
- a connection must finish sending each request's head and body (a WebSocket upgrade included)
  within REQUEST_DEADLINE seconds of opening or of its previous response. Twisted's own idle
  timeout restarts at every byte, so a client dripping a header a minute was held for ever.
"""
import os
import sys

import daphne.server
from daphne.cli import DEFAULT_HOST, CommandLineInterface
from daphne.http_protocol import HTTPFactory
from daphne.ws_protocol import WebSocketFactory
from twisted.web.http import HTTPChannel, _GenericHTTPChannelProtocol

from ahp.deployment import refusal_to_start

REQUEST_DEADLINE = float(os.environ.get("AHP_REQUEST_DEADLINE_SECONDS", "20"))


class ClosingWebSocketFactory(WebSocketFactory):
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


# daphne's Server builds its factories by these module-level names.
daphne.server.WebSocketFactory = ClosingWebSocketFactory
daphne.server.HTTPFactory = DeadlineHTTPFactory



def listening_hosts(argv):
    """The TCP hosts daphne's command line binds, or None when it names other endpoints."""
    args, _ = CommandLineInterface().parser.parse_known_args(argv)
    if args.unix_socket or args.file_descriptor is not None or args.socket_strings:
        return None
    return [args.host or DEFAULT_HOST]


if __name__ == "__main__":
    refusal = refusal_to_start(listening_hosts(sys.argv[1:]))
    if refusal:
        sys.exit(refusal)
    CommandLineInterface.entrypoint()
