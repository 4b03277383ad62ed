"""`python -m ahp.serve`: daphne, exactly as `python -m daphne` runs it, except that a frame over
its size limit (1 MiB) is refused with close code 1009 ("message too big") rather than by
dropping the TCP connection, so a client learns why it was cut off."""
import daphne.server
from daphne.cli import CommandLineInterface
from daphne.ws_protocol import WebSocketFactory


class ClosingWebSocketFactory(WebSocketFactory):
    def setProtocolOptions(self, **options):
        super().setProtocolOptions(failByDrop=False, **options)


# daphne's Server builds its WebSocket factory by this module-level name.
daphne.server.WebSocketFactory = ClosingWebSocketFactory

if __name__ == "__main__":
    CommandLineInterface.entrypoint()
