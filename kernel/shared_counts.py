"""Counts every node of a host shares, kept in Redis (REDIS_URL): a person's open sockets and
the failed handshakes of a key. Each check-and-change is one Lua script, so two nodes never
both take a last place, and each key expires, so what a dead node counted lapses by itself.
Times are Redis's own, so nodes whose clocks differ still agree.

Keys start with AHP_REDIS_KEY_PREFIX, so two hosts (or two test runs) on one Redis never meet."""
import asyncio
import weakref
from collections.abc import Awaitable
from typing import Any, cast

import redis
import redis.asyncio
from django.conf import settings

_clients: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, redis.asyncio.Redis]" = weakref.WeakKeyDictionary()

# KEYS[1]: a set of claims scored by when each lapses. ARGV: the claim, the most claims, their lifetime.
CLAIM = """
local now = redis.call('TIME')
now = tonumber(now[1]) + tonumber(now[2]) / 1e6
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZSCORE', KEYS[1], ARGV[1]) == false and redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then
  return 0
end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
redis.call('EXPIRE', KEYS[1], math.ceil(tonumber(ARGV[3])))
return 1
"""
# KEYS: sets of claims; ARGV[1]: the lifetime, then the claim renewed in each set (one a key).
RENEW = """
local now = redis.call('TIME')
now = tonumber(now[1]) + tonumber(now[2]) / 1e6
local ttl = tonumber(ARGV[1])
for i, key in ipairs(KEYS) do
  redis.call('ZADD', key, 'XX', now + ttl, ARGV[i + 1])
  redis.call('EXPIRE', key, math.ceil(ttl))
end
return #KEYS
"""
# KEYS[1]: a key's failures (a hash: count, next). ARGV[1]: this attempt's delay. Returns how long
# it waits: its delay, after those of the attempts already waiting.
RESERVE = """
local now = redis.call('TIME')
now = tonumber(now[1]) + tonumber(now[2]) / 1e6
local start = math.max(now, tonumber(redis.call('HGET', KEYS[1], 'next') or '0'))
redis.call('HSET', KEYS[1], 'next', tostring(start + tonumber(ARGV[1])))
return tostring(start + tonumber(ARGV[1]) - now)
"""


def client() -> redis.asyncio.Redis:
    """This event loop's client: a client's connections belong to the loop that made them."""
    loop = asyncio.get_running_loop()
    if loop not in _clients:
        _clients[loop] = redis.asyncio.Redis.from_url(settings.REDIS_URL)
    return _clients[loop]


async def run(script: str, keys: int, *args: object) -> Any:
    """What `script` answers for its `keys` first arguments and the rest (redis-py's types
    name only a synchronous client's answer)."""
    return await cast(Awaitable[Any], client().eval(script, keys, *cast(list[str], args)))


def key(*parts: object) -> str:
    return ":".join([settings.AHP_REDIS_KEY_PREFIX, *map(str, parts)])


async def claim(name: str, member: str, limit: int, lifetime: float) -> bool:
    """Whether `member` holds a place in set `name`: taken now if fewer than `limit` hold one."""
    return bool(await run(CLAIM, 1, name, member, limit, lifetime))


async def release(name: str, member: str) -> None:
    await cast(Awaitable[int], client().zrem(name, member))


async def renew(claims: list[tuple[str, str]], lifetime: float) -> None:
    """Push back the lapse of each (set, member) still held."""
    if claims:
        await run(RENEW, len(claims), *(name for name, _ in claims), lifetime, *(member for _, member in claims))


async def failures(name: str) -> int:
    return int(await cast(Awaitable[bytes | None], client().hget(name, "count")) or 0)


async def fail(name: str, forget_after: float) -> None:
    async with client().pipeline(transaction=True) as pipe:
        pipe.hincrby(name, "count", 1)
        pipe.expire(name, int(forget_after))
        await pipe.execute()


async def reserve(name: str, delay: float) -> float:
    return float(await run(RESERVE, 1, name, delay))


def forget(pattern: str) -> None:
    """Delete every key under `pattern` (after the prefix)."""
    connection = redis.Redis.from_url(settings.REDIS_URL)
    try:
        for found in connection.scan_iter(match=key(pattern)):
            connection.delete(found)
    finally:
        connection.close()
