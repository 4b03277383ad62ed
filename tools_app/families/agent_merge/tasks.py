"""Agent Merge's scheduled work: reruns deferred while a workflow's attempt was still going, and
the pull requests it watches."""
import logging

from celery import shared_task

from .github import GitHubError
from .tools import perform_deferred_reruns
from .watch import sweep_watches

logger = logging.getLogger(__name__)


@shared_task
def sweep_deferred_reruns():
    try:
        return perform_deferred_reruns()
    except GitHubError as exc:
        logger.warning("Deferred reruns wait: %s", exc)
        return 0


@shared_task
def watch_pull_requests():
    return len(sweep_watches())
