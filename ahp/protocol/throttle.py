"""Slowing down repeated failed handshakes from one address.

Per process and per client address: the first FREE_FAILURES failed handshakes cost nothing;
after that every handshake from the address (good token or not, so a guesser learns nothing
by giving up early) waits, twice as long per further failure, up to MAX_DELAY. Waits queue
behind each other, so opening many sockets at once does not buy parallel guesses. An address
is forgotten FORGET_AFTER seconds after its last failure.
"""
import asyncio
import time

FREE_FAILURES = 5
BASE_DELAY = 0.25
MAX_DELAY = 8.0
FORGET_AFTER = 300.0
MAX_ADDRESSES = 10_000


class HandshakeThrottle:
    def __init__(self):
        self.failures = {}  # address -> [count, time of the last failure, when the next handshake may go]

    def delay_for(self, count):
        if count < FREE_FAILURES:
            return 0.0
        return min(BASE_DELAY * 2 ** (count - FREE_FAILURES), MAX_DELAY)

    def _entry(self, address, now):
        entry = self.failures.get(address)
        if entry is not None and now - entry[1] > FORGET_AFTER:
            del self.failures[address]
            entry = None
        return entry

    async def wait(self, address):
        """Before checking a token from `address`: wait what its failures owe."""
        now = time.monotonic()
        entry = self._entry(address, now)
        if entry is None:
            return 0.0
        delay = self.delay_for(entry[0])
        if not delay:
            return 0.0
        start = max(now, entry[2])
        entry[2] = start + delay
        await asyncio.sleep(start + delay - now)
        return start + delay - now

    def failed(self, address):
        now = time.monotonic()
        entry = self._entry(address, now)
        if entry is None:
            if len(self.failures) >= MAX_ADDRESSES:
                self.forget_stale(now)
            entry = self.failures[address] = [0, now, now]
        entry[0] += 1
        entry[1] = now

    def forget_stale(self, now):
        for address in [a for a, e in self.failures.items() if now - e[1] > FORGET_AFTER]:
            del self.failures[address]
        if len(self.failures) >= MAX_ADDRESSES:  # still full: the oldest failures go first
            for address in sorted(self.failures, key=lambda a: self.failures[a][1])[: MAX_ADDRESSES // 10]:
                del self.failures[address]

    def clear(self):
        self.failures.clear()


HANDSHAKES = HandshakeThrottle()


def address_of(scope):
    client = scope.get("client")
    return client[0] if client else "unknown"
