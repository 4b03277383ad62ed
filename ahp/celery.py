import os

from celery import Celery
from celery.signals import worker_init, worker_ready

from ahp.internals import refuse_to_start_if_moved

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ahp.settings")

app = Celery("ahp")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_init.connect
def check_internals(**kwargs: object) -> None:
    refuse_to_start_if_moved()


@worker_ready.connect
def announce_worker(sender, **kwargs):
    # Heartbeat at once, rather than after the first beat interval, so /healthz sees a new worker.
    app.send_task("ahp.tasks.record_worker_heartbeat", kwargs={"hostname": sender.hostname})
