"""tests/settings.py with one periodic entry, every second, of a task no worker runs, for the
processes tests/test_one_beat.py starts: what their beats send of it stays in the broker's queue
to be counted."""
from tests.settings import *  # noqa: F401,F403

CELERY_BEAT_SCHEDULE = {"tick": {"task": "tests.beat_tick", "schedule": 1.0}}
