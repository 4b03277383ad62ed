"""The embedded channel layer: Channels' in-memory layer, sweeping expired messages and group
memberships at most once a second.

The library sweeps every channel and every membership of the process on each receive and each
group send, and every socket's consumer receives: a socket's opening cost grew with the sockets
already open, so a tenant opening a thousand at once took a million steps on the event loop
while every other tenant's frames waited. Expiry is counted in seconds (a minute for a message,
a day for a membership), so a sweep up to a second late changes nothing a client sees.
"""
import time

from channels.layers import InMemoryChannelLayer

SWEEP_EVERY_SECONDS = 1.0


class MemoryChannelLayer(InMemoryChannelLayer):
    next_sweep = 0.0

    def _clean_expired(self) -> None:
        now = time.monotonic()
        if now < self.next_sweep:
            return
        self.next_sweep = now + SWEEP_EVERY_SECONDS
        super()._clean_expired()
