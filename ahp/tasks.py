import socket

from celery import shared_task
from django.utils import timezone

from .models import WorkerHeartbeat


@shared_task
def record_worker_heartbeat(hostname=None):
    """Beat runs this on every worker cycle; /healthz tells operators when a worker was last seen."""
    WorkerHeartbeat.objects.update_or_create(
        hostname=hostname or socket.gethostname(), defaults={"seen": timezone.now()}
    )
