"""Slowing down repeated failed handshakes, never a good token.

Failures are counted per key, host-wide (in Redis when REDIS_URL is set, else in the one serving
process a tenant's connections go to): the client's address and the public prefix of
the token it offered (`ahp_<key id>`, or the first characters of something that is not a token).
The first FREE_FAILURES failed handshakes of a key cost nothing; after that each further failure
of that key waits, twice as long per failure, up to MAX_DELAY, before it is refused, and waits of
one key queue behind each other. A token is checked before anything waits: a good one, even of
the very key id someone is guessing at from the same address, never waits. So the throttle slows
a guesser who waits for each answer; one who guesses in parallel is stopped by the secret's 256
bits, not by it. A key is forgotten FORGET_AFTER seconds after its last failure; at most MAX_KEYS
are remembered.

The address is the peer's, or, when the peer is a proxy the operator trusts
(AHP_TRUSTED_PROXIES), the nearest untrusted address in its X-Forwarded-For: behind a proxy
every client would otherwise share one address.
"""
import asyncio
import ipaddress
import time
from typing import Any

from django.conf import settings

from kernel import shared_counts

FREE_FAILURES = 5
BASE_DELAY = 0.25
MAX_DELAY = 4.0  # well under ahp.deployment.HANDSHAKE_SECONDS: a slowed failure still gets its refusal
FORGET_AFTER = 300.0
MAX_KEYS = 10_000
PREFIX_CHARS = 24  # "ahp_" and a 16-character key id; what a token shows in the clear


class HandshakeThrottle:
    """The failures counted in this process: the embedded host's, one node whose front hands all
    of a tenant's connections to one serving process."""

    def __init__(self) -> None:
        # key -> [count, time of the last failure, when the next handshake may go]
        self.failures: dict[tuple[str, str], list[float]] = {}

    def delay_for(self, count: int) -> float:
        if count < FREE_FAILURES:
            return 0.0
        return min(BASE_DELAY * 2 ** (count - FREE_FAILURES), MAX_DELAY)

    def _entry(self, key: tuple[str, str], now: float) -> list[float] | None:
        entry = self.failures.get(key)
        if entry is not None and now - entry[1] > FORGET_AFTER:
            del self.failures[key]
            entry = None
        return entry

    async def wait(self, key: tuple[str, str]) -> float:
        """Before refusing a failed handshake of `key`: wait what its earlier failures owe."""
        now = time.monotonic()
        entry = self._entry(key, now)
        if entry is None:
            return 0.0
        delay = self.delay_for(int(entry[0]))
        if not delay:
            return 0.0
        start = max(now, entry[2])
        entry[2] = start + delay
        await asyncio.sleep(start + delay - now)
        return start + delay - now

    async def failed(self, key: tuple[str, str]) -> None:
        now = time.monotonic()
        entry = self._entry(key, now)
        if entry is None:
            if len(self.failures) >= MAX_KEYS:
                self.forget_stale(now)
            entry = self.failures[key] = [0, now, now]
        entry[0] += 1
        entry[1] = now

    def forget_stale(self, now: float) -> None:
        for key in [k for k, e in self.failures.items() if now - e[1] > FORGET_AFTER]:
            del self.failures[key]
        if len(self.failures) >= MAX_KEYS:  # still full: the oldest failures go first
            for key in sorted(self.failures, key=lambda k: self.failures[k][1])[: MAX_KEYS // 10]:
                del self.failures[key]

    def clear(self) -> None:
        self.failures.clear()


class SharedHandshakeThrottle(HandshakeThrottle):
    """The failures counted in Redis, host-wide: a guesser spreading its handshakes over the nodes
    behind a load balancer waits as it would on one. Redis forgets a key FORGET_AFTER seconds after
    its last failure, so it needs no cap."""

    def _name(self, key: tuple[str, str]) -> str:
        return shared_counts.key("handshakes", *key)

    async def wait(self, key: tuple[str, str]) -> float:
        delay = self.delay_for(await shared_counts.failures(self._name(key)))
        if not delay:
            return 0.0
        owed = await shared_counts.reserve(self._name(key), delay)
        await asyncio.sleep(owed)
        return owed

    async def failed(self, key: tuple[str, str]) -> None:
        await shared_counts.fail(self._name(key), FORGET_AFTER)

    def clear(self) -> None:
        shared_counts.forget("handshakes:*")


HANDSHAKES = SharedHandshakeThrottle() if settings.REDIS_URL else HandshakeThrottle()


def token_prefix(token: str | None) -> str:
    """The part of a token anyone may see: `ahp_<key id>`; never any of its secret."""
    prefix, _, rest = (token or "").partition("_")
    key_id = rest.partition("_")[0]
    return f"{prefix}_{key_id}"[:PREFIX_CHARS] if key_id else (token or "")[:8]


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text.strip())
    except ValueError:
        return None


def _trusted(ip: ipaddress.IPv4Address | ipaddress.IPv6Address | None) -> bool:
    return ip is not None and any(ip in network for network in settings.AHP_TRUSTED_PROXIES)


def address_of(scope: dict[str, Any]) -> str:
    """The client's address: the peer's, or behind a trusted proxy the nearest address its
    X-Forwarded-For names that is not itself a trusted proxy."""
    client = scope.get("client")
    address = client[0] if client else "unknown"
    if not _trusted(_ip(address)):
        return address
    forwarded = b",".join(v for k, v in scope.get("headers", []) if k.lower() == b"x-forwarded-for")
    for hop in reversed(forwarded.decode("latin-1").split(",")):
        if not hop.strip():
            continue
        ip = _ip(hop)
        if not _trusted(ip):
            return str(ip) if ip else hop.strip()[:64]
        address = str(ip)
    return address


def key_of(scope: dict[str, Any], token: str | None) -> tuple[str, str]:
    return address_of(scope), token_prefix(token)
