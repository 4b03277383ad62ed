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


def test_the_filesystem_broker_never_hands_a_worker_a_half_written_message(tmp_path):
    """A sender process puts large messages while this process takes them as a worker does: each
    taken message is whole (kombu's own transport let the taker move a file still being written)."""
    from kombu import Connection

    folder = tmp_path / "queue"
    folder.mkdir()
    options = {"data_folder_in": str(folder), "data_folder_out": str(folder), "control_folder": str(tmp_path)}
    sender = subprocess.Popen([sys.executable, "-c", f"""
from kombu import Connection
with Connection("filesystem://", transport="kernel.filesystem_broker:Transport", transport_options={options!r}) as c:
    q = c.SimpleQueue("tasks")
    for i in range(300):
        q.put({{"n": i, "body": "x" * 200_000}})
"""], cwd=ROOT)
    taken = []
    with Connection("filesystem://", transport="kernel.filesystem_broker:Transport", transport_options=options) as c:
        queue = c.SimpleQueue("tasks")
        deadline = time.monotonic() + 120
        while len(taken) < 300 and time.monotonic() < deadline:
            try:
                message = queue.get(timeout=1)
            except queue.Empty:
                continue
            taken.append(message.payload["n"])
            message.ack()
    sender.wait(timeout=60)
    assert sorted(taken) == list(range(300))
