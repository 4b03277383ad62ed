import logging
import os

from celery import Celery, bootsteps
from celery.signals import worker_init

from ahp.deployment import secrets_key_refusal
from ahp.internals import refuse_to_start_if_moved

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ahp.settings")

app = Celery("ahp")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

HEARTBEAT_SECONDS = 30.0
logger = logging.getLogger(__name__)


def record_heartbeat(hostname: str) -> None:
    from django.db import DatabaseError

    from .actions import do_record_worker_heartbeat

    try:
        do_record_worker_heartbeat(hostname)
    except DatabaseError as exc:  # the database is down: /healthz shows the worker's last beat
        logger.warning("Could not record this worker's heartbeat (%s: %s)", exc.__class__.__name__, exc)


class Heartbeat(bootsteps.StartStopStep):
    """Each worker records its own heartbeat, at once (so /healthz sees a new worker) and then on
    its timer: a periodic task would be run by whichever worker took it, not by this node's."""

    requires = ("celery.worker.components:Timer",)

    def start(self, worker) -> None:
        record_heartbeat(worker.hostname)
        self.beating = worker.timer.call_repeatedly(HEARTBEAT_SECONDS, record_heartbeat, (worker.hostname,))

    def stop(self, worker) -> None:
        self.beating.cancel()


app.steps["worker"].add(Heartbeat)


@worker_init.connect
def refuse_to_start_unfit(**kwargs: object) -> None:
    """A worker starts only where a serving process would: the internals it patches are where
    they were, and its AHP_SECRETS_KEY opens the database's sealed secrets (it opens them for the
    turns and tools it runs). Its sentence, no traceback (a SystemExit)."""
    refuse_to_start_if_moved()
    refusal = secrets_key_refusal()
    if refusal:
        raise SystemExit(refusal)
