"""Every change the project app makes: one `do_*` function each."""
from django.utils import timezone

from sessions_app.events.log import this_node

from .models import WorkerHeartbeat


def do_record_worker_heartbeat(hostname: str) -> WorkerHeartbeat:
    """A Celery worker of this node is alive now; this node's /healthz reports its newest."""
    beat, _ = WorkerHeartbeat.objects.update_or_create(
        hostname=hostname, defaults={"seen": timezone.now(), "node": this_node()})
    return beat
