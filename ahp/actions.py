"""Every change the project app makes: one `do_*` function each."""
from django.utils import timezone

from .models import WorkerHeartbeat


def do_record_worker_heartbeat(hostname):
    """A Celery worker is alive now; /healthz reports the newest."""
    beat, _ = WorkerHeartbeat.objects.update_or_create(hostname=hostname, defaults={"seen": timezone.now()})
    return beat
