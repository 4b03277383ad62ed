"""A node refuses to start when its AHP_SECRETS_KEY cannot open the secrets sealed in the
database it shares with the other nodes."""
import subprocess
import sys

import pytest
from cryptography.fernet import Fernet

from sandbox.sealing import WRONG_KEY

from .conftest import ROOT, free_port, stop
from .test_deployment import host_env, serve

pytestmark = pytest.mark.e2e  # serving processes


def migrated(tmp_path, key):
    subprocess.run([sys.executable, "manage.py", "migrate", "--no-input"], env=host_env(tmp_path, AHP_SECRETS_KEY=key),
                   cwd=ROOT, check=True, capture_output=True)


def test_a_node_whose_secrets_key_cannot_open_the_databases_secrets_refuses_to_start(tmp_path):
    first, other = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    migrated(tmp_path, first)
    assert serve(tmp_path, "127.0.0.1", AHP_SECRETS_KEY=first)[0] is None  # the first node seals the check
    code, said = serve(tmp_path, "127.0.0.1", AHP_SECRETS_KEY=other)
    assert code == 1 and said.strip() == WRONG_KEY
    assert serve(tmp_path, "127.0.0.1", AHP_SECRETS_KEY=f"{other},{first}")[0] is None  # rotating: new key first
    assert serve(tmp_path, "127.0.0.1", AHP_SECRETS_KEY=other)[0] is None  # the rotation resealed it
    code, said = serve(tmp_path, "127.0.0.1", AHP_SECRETS_KEY=first)
    assert code == 1 and said.strip() == WRONG_KEY


def test_runhost_refuses_to_start_a_node_with_the_wrong_secrets_key(tmp_path):
    first, other = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    migrated(tmp_path, first)
    assert serve(tmp_path, "127.0.0.1", AHP_SECRETS_KEY=first)[0] is None
    done = subprocess.run([sys.executable, "manage.py", "runhost", "--port", str(free_port())],
                          env=host_env(tmp_path, AHP_SECRETS_KEY=other), cwd=ROOT, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 1 and done.stderr.strip().endswith(f"CommandError: {WRONG_KEY}")


def worker(tmp_path, key, *options):
    return [sys.executable, "-m", "celery", "-A", "ahp", "worker", "--pool", "solo", *options], host_env(
        tmp_path, AHP_SECRETS_KEY=key)


def test_a_celery_worker_whose_secrets_key_cannot_open_the_databases_secrets_refuses_to_start(tmp_path):
    first, other = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    migrated(tmp_path, first)
    assert serve(tmp_path, "127.0.0.1", AHP_SECRETS_KEY=first)[0] is None  # the first node seals the check
    argv, env = worker(tmp_path, other, "--loglevel", "WARNING")
    done = subprocess.run(argv, env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1] == WRONG_KEY
    argv, env = worker(tmp_path, first, "--loglevel", "INFO")
    right = subprocess.Popen(argv, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert any(line.rstrip().endswith("ready.") for line in right.stderr), "the worker with the right key never started"
    finally:
        stop(right)
