"""The host's settings for a test run: ahp.settings unchanged, except that each pytest-xdist worker
(`make test` runs several) gets state of its own, as two hosts on one machine would. Its database is
already named per process; this adds its var/ (the embedded Celery queue, sandboxes, keys) and its
Redis keys (channel layer groups and the Celery queue share one Redis db, and two workers' rows have
the same primary keys, so unprefixed they would wake each other's sockets and take each other's
tasks). Processes a test starts inherit DJANGO_SETTINGS_MODULE and the worker's name, so they match."""
import hashlib
import os
from pathlib import Path
from typing import Any, cast

WORKER = os.environ.get("PYTEST_XDIST_WORKER")
if WORKER and "AHP_VAR_DIR" not in os.environ:
    os.environ["AHP_VAR_DIR"] = str(Path(__file__).resolve().parent.parent / "var" / "xdist" / WORKER)

from ahp.settings import *  # noqa: E402,F401,F403
from ahp.settings import CHANNEL_LAYERS, REDIS_URL  # noqa: E402

# Two checkouts' runs on one machine share no sandbox id, Redis key or pub/sub channel.
CHECKOUT = Path(__file__).resolve().parent.parent
_SLOT = int(hashlib.sha256(str(CHECKOUT).encode()).hexdigest(), 16) % 80

if WORKER and REDIS_URL:
    cast(dict[str, Any], CHANNEL_LAYERS["default"]["CONFIG"])["prefix"] = f"asgi-{_SLOT}-{WORKER}"
    CELERY_BROKER_TRANSPORT_OPTIONS = {"global_keyprefix": f"{_SLOT}-{WORKER}-"}
    AHP_REDIS_KEY_PREFIX = f"ahp-{_SLOT}-{WORKER}"
    CELERY_REDBEAT_KEY_PREFIX = f"{AHP_REDIS_KEY_PREFIX}:redbeat"

# Sandbox ids: claimed in this checkout's var/ (tests/conftest.py empties it as a run starts), from
# a range of its own.
AHP_SANDBOX_IDS = f"{200000 + _SLOT * 10000}-{200000 + _SLOT * 10000 + 9999}"
AHP_SANDBOX_ID_FOLDER = str(CHECKOUT / "var" / "xdist" / "sandbox-ids")
