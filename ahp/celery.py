import os

from celery import Celery
from celery.signals import worker_ready

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ahp.settings")

app = Celery("ahp")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_ready.connect
def announce_worker(sender, **kwargs):
    # Heartbeat at once, rather than after the first beat interval, so /healthz sees a new worker.
    app.send_task("ahp.tasks.record_worker_heartbeat", kwargs={"hostname": sender.hostname})
