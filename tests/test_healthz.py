"""`/healthz` per node: the database, this node's serving processes, and the heartbeat of this
node's own worker, never another node's."""
import json
import urllib.request
from datetime import timedelta

import pytest
from django.utils import timezone

from ahp.models import WorkerHeartbeat

from .test_front import connected, front


def test_it_reports_this_nodes_worker_not_a_newer_one_of_another_node(db, client, settings):
    settings.AHP_NODE_ID = "node-1"
    now = timezone.now()
    WorkerHeartbeat.objects.create(hostname="celery@node-2", node="node-2", seen=now)
    health = client.get("/healthz").json()
    assert health["node"] == "node-1" and health["workerSeen"] is None  # node-2's worker is not this node's
    WorkerHeartbeat.objects.create(hostname="celery@node-1", node="node-1", seen=now - timedelta(minutes=5))
    health = client.get("/healthz").json()
    assert health == {"node": "node-1", "database": "ok", "servingProcesses": {"running": 1, "of": 1},
                      "workerSeen": (now - timedelta(minutes=5)).isoformat()}


@pytest.mark.e2e
def test_through_the_front_it_counts_the_nodes_serving_processes(transactional_db, acme, tmp_path):
    with front(tmp_path / "front.log", processes=2) as (port, _):
        connected(port, acme.tokens["admin"]).close()  # the serving processes are up
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=60) as answer:
            assert json.load(answer)["servingProcesses"] == {"running": 2, "of": 2}
