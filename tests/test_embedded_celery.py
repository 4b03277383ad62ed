"""Scheduled work runs through a real worker: on the embedded filesystem broker with no
environment, on Redis when REDIS_URL is set."""
import subprocess
import sys
import time

import pytest

from ahp.models import WorkerHeartbeat
from ahp.tasks import record_worker_heartbeat

from .conftest import ROOT, child_env, stop

pytestmark = pytest.mark.e2e  # a Celery worker process


@pytest.mark.django_db(transaction=True)
def test_a_task_scheduled_with_a_countdown_runs_through_a_real_worker(tmp_path):
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "ahp", "worker", "--pool", "solo", "--loglevel", "WARNING"],
        env=child_env(), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        sent = time.monotonic()
        record_worker_heartbeat.apply_async(kwargs={"hostname": "countdown-test"}, countdown=2)
        while time.monotonic() - sent < 60 and not WorkerHeartbeat.objects.filter(hostname="countdown-test").exists():
            time.sleep(0.2)
        ran_after = time.monotonic() - sent
    finally:
        stop(worker)
    assert WorkerHeartbeat.objects.filter(hostname="countdown-test").exists(), "the worker never ran the task"
    assert ran_after >= 2, "the task ran before its countdown"
