import socket

from celery import shared_task

from .actions import do_record_worker_heartbeat


@shared_task
def record_worker_heartbeat(hostname=None):
    """Beat runs this on every worker cycle; /healthz tells operators when a worker was last seen."""
    do_record_worker_heartbeat(hostname or socket.gethostname())
