from datetime import timedelta

from celery import shared_task
from django.utils import timezone

from sessions_app.tasks import STALE_CONNECTION_SECONDS

from .actions import do_end_orphaned_terminals


@shared_task
def sweep_orphaned_terminals(stale_after_seconds=STALE_CONNECTION_SECONDS):
    """Terminals of a dead process exit (their PTY went with it)."""
    return do_end_orphaned_terminals(timezone.now() - timedelta(seconds=stale_after_seconds))
