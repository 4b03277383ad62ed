"""Test servers' ports: each pytest worker holds a range of its own, whichever test run it is of."""
import os
import subprocess
import sys

from bench.servers import ROOT, worker_ports

HOLDING = "import sys; from bench.servers import worker_ports; print(worker_ports(), flush=True); sys.stdin.read()"


def test_the_same_worker_of_two_test_runs_holds_a_range_of_its_own():
    """Two test runs on one machine (two checkouts, a CI run beside a developer's) each have a
    worker gw0: numbered by worker, both took the same ports, and a test reached the other run's
    server (403 for its token, a refused connection, an address in use)."""
    mine = worker_ports()  # this test's own worker holds one too
    env = {**os.environ, "PYTEST_XDIST_WORKER": "gw0"}
    runs = [subprocess.Popen([sys.executable, "-c", HOLDING], cwd=ROOT, env=env, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True) for _ in range(2)]
    try:
        firsts = [int(run.stdout.readline()) for run in runs]
    finally:
        for run in runs:
            run.stdin.close()
            run.wait(10)
    assert len({mine, *firsts}) == 3
