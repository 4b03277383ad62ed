"""Exactly one scheduler: every node starts a Celery beat, RedBeat's lock in Redis lets one of
them send the schedule, and another takes over when that one dies."""
import json
import subprocess
import sys
import time

import pytest
import redis
from django.conf import settings

from kernel import shared_counts

from .conftest import PROCESS_DEADLINE_SECONDS, ROOT, child_env, stop

pytestmark = [pytest.mark.e2e,  # Celery beats
              pytest.mark.skipif(not settings.REDIS_URL, reason="the nodes' beats share a lock in Redis (REDIS_URL)")]

INTERVAL = 1.0  # tests/beat_settings.py
QUEUE = getattr(settings, "CELERY_BROKER_TRANSPORT_OPTIONS", {}).get("global_keyprefix", "") + "celery"


def ticks(client):
    """How many messages of the periodic task wait in the broker's queue (no worker takes them)."""
    return sum(json.loads(m)["headers"].get("task") == "tests.beat_tick" for m in client.lrange(QUEUE, 0, -1))


def beat(log):
    with open(log, "w") as output:
        return subprocess.Popen([sys.executable, "-m", "celery", "-A", "ahp", "beat", "--loglevel", "INFO"],
                                env=child_env(DJANGO_SETTINGS_MODULE="tests.beat_settings"), cwd=ROOT,
                                stdout=output, stderr=subprocess.STDOUT)


def first_ticks(client, beats):
    deadline = time.monotonic() + PROCESS_DEADLINE_SECONDS
    while not ticks(client):
        assert time.monotonic() < deadline and all(b.poll() is None for b in beats), "no beat sent the task"
        time.sleep(0.1)
    return time.monotonic(), ticks(client)


@pytest.fixture
def client():
    shared_counts.forget("redbeat*")
    connection = redis.Redis.from_url(settings.REDIS_URL)
    connection.delete(QUEUE)
    yield connection
    connection.delete(QUEUE)
    connection.close()
    shared_counts.forget("redbeat*")


def test_two_beats_send_a_periodic_task_once_per_interval_and_one_takes_over_when_the_other_dies(client, tmp_path):
    logs = [tmp_path / "one.log", tmp_path / "two.log"]
    beats = [beat(logs[0]), beat(logs[1])]
    try:
        started, before = first_ticks(client, beats)
        time.sleep(8 * INTERVAL)
        # Two beats would send about twice this; a slow machine only sends fewer.
        assert ticks(client) - before <= (time.monotonic() - started) / INTERVAL + 1
        holding = ["beat: Acquired lock" in log.read_text() for log in logs]
        assert sorted(holding) == [False, True]
        holder = beats[holding.index(True)]
        holder.kill()  # dies holding the lock
        holder.wait()
        client.delete(QUEUE)
        first_ticks(client, [b for b in beats if b is not holder])  # the other's, once the lock lapses
    finally:
        for process in beats:
            stop(process)
