"""A wakeup's scheduled work. Each task re-reads its row and acts only if the row
is still due, so a task that fires twice, late, or after the sweep changes nothing."""
import logging
import threading
from datetime import datetime

from celery import shared_task

from . import actions

logger = logging.getLogger(__name__)


@shared_task
def fire_wakeup(pk, due):
    actions.do_fire_wakeup(pk, datetime.fromisoformat(due))


@shared_task
def sweep_wakeups():
    """Fires whatever wakeup is due and was missed (a lost task, a dead worker)."""
    return actions.fire_due_wakeups()


def fire_wakeups_at_start():
    """At a start: refused wakeups get another chance, and whatever fell due while the host was
    down fires, once (the conditional DELETE keeps several starting workers from doubling it)."""
    actions.do_release_refused_wakeups()
    return actions.fire_due_wakeups()


def fire_wakeups_at_start_in_background(sender=None, **kwargs):
    # Run in this worker, not through the broker, and beside its start rather than in its way.
    threading.Thread(target=_fire_at_start, name="wakeups-at-start", daemon=True).start()


def _fire_at_start():
    from django.db import connection

    try:
        fire_wakeups_at_start()
    except Exception:
        logger.exception("Firing wakeups at start failed; the sweep will retry")
    finally:
        connection.close()
