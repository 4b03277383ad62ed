"""A socket opening and closing costs Redis no subscription of its own: its channel is one of its
process's inbox, and what the host asks its client goes to that channel, so a tenant churning
sockets puts no SUBSCRIBE and UNSUBSCRIBE per socket on Redis (and on the serving process's
event loop, which waits for each)."""
import shutil

import pytest
from django.conf import settings
from django.db import connection
from redis import Redis

from sessions_app.models import ClientConnection

from ..ahp.protocol.harness import AhpClient
from .fault_helpers import PrivateRedis, start_daphne, wait_until

pytestmark = [
    pytest.mark.e2e,  # a private Redis and daphne
    pytest.mark.skipif(
        not settings.REDIS_URL or connection.vendor != "postgresql" or not shutil.which("redis-server"),
        reason="a daphne on a private Redis needs the Redis/PostgreSQL run (REDIS_URL, DATABASE_URL) and redis-server",
    ),
]


def subscription_commands(redis):
    stats = Redis.from_url(redis.url).info("commandstats")
    return {command: stats.get(f"cmdstat_{command}", {}).get("calls", 0) for command in ("subscribe", "unsubscribe")}


def test_sockets_opened_and_closed_cost_redis_no_subscription_each(acme, transactional_db, tmp_path):
    redis = PrivateRedis(tmp_path)
    redis.start()
    port, daphne = start_daphne(tmp_path, REDIS_URL=redis.url)
    try:
        with AhpClient(port, acme.tokens["member"], "staying"):  # the process's inbox and the person's groups
            before = subscription_commands(redis)
            for i in range(20):
                with AhpClient(port, acme.tokens["member"], f"passing-{i}") as passing:
                    assert passing.call("ping", {"channel": "ahp-root://"}) is None
            assert wait_until(lambda: not ClientConnection.objects.filter(client_id__startswith="passing-").exists())
            after = subscription_commands(redis)
    finally:
        daphne.terminate()
        daphne.wait(10)
        redis.stop()
    assert after == before
