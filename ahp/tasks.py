import socket

from celery import shared_task

from .actions import do_record_worker_heartbeat


@shared_task
def record_worker_heartbeat(hostname=None):
    """A heartbeat under `hostname`, recorded by whichever worker runs it: a probe that tasks sent
    reach a worker (each worker records its own heartbeat itself, ahp/celery.py)."""
    do_record_worker_heartbeat(hostname or socket.gethostname())
