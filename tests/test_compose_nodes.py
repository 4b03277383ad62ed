"""docker-compose.nodes.yml, the production layout on several nodes, cannot run here (no Docker
engine): it is validated against the compose-spec schema (check-jsonschema's pinned copy), its
load balancer's configuration by `haproxy -c`, and its wiring against the settings that read it."""
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ahp import settings as host_settings

from .conftest import ROOT

CHECK = [str(Path(sys.executable).parent / "check-jsonschema"), "--builtin-schema", "vendor.compose-spec"]
HAPROXY = ROOT / "deploy" / "haproxy.cfg"


def nodes():
    with open(ROOT / "docker-compose.nodes.yml") as f:
        return yaml.safe_load(f)


def host_services(compose):
    return {name: s for name, s in compose["services"].items() if s.get("build") == "." and name != "migrate"}


@pytest.mark.parametrize("name", ["docker-compose.yml", "docker-compose.nodes.yml"])
def test_the_compose_files_are_valid_compose_files(name):
    done = subprocess.run([*CHECK, name], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_schema_check_refuses_a_broken_compose_file(tmp_path):
    broken = tmp_path / "compose.yml"
    broken.write_text("services:\n  web:\n    build: .\n    ports: 8000\n")
    assert subprocess.run([*CHECK, str(broken)], capture_output=True).returncode == 1


def test_the_load_balancer_configuration_is_valid():
    if shutil.which("haproxy") is None:
        pytest.skip("haproxy is not installed (.ci/run installs it)")
    done = subprocess.run(["haproxy", "-c", "-f", str(HAPROXY)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_load_balancer_sends_to_every_nodes_web_tier_and_upgrades_websockets():
    config = HAPROXY.read_text()
    servers = set(re.findall(r"^\s*server \S+ (\S+):8000", config, re.MULTILINE))
    webs = {name for name in nodes()["services"] if name.endswith("-web")}
    assert servers == webs and len(webs) >= 2
    assert "timeout tunnel" in config and "balance leastconn" in config  # long-lived upgrades, no stickiness
    assert not re.search(r"^\s*(cookie|stick|balance source)", config, re.MULTILINE)


def test_each_node_has_a_web_tier_and_a_worker_with_one_node_id_of_its_own():
    services = host_services(nodes())
    node_ids = {name: s["environment"]["AHP_NODE_ID"] for name, s in services.items()}
    for name, node_id in node_ids.items():
        if name.endswith("-web"):
            assert node_ids[name.replace("-web", "-worker")] == node_id  # /healthz reports its own worker
    assert len(set(node_ids.values())) == len(services) // 2 + 1  # the nodes and the scheduler
    beats = [s for s in services.values() if " beat" in " ".join(s["command"])]
    assert len(beats) == 1


def test_every_host_process_shares_the_keys_the_workspaces_and_reads_only_known_settings():
    compose = nodes()
    services = host_services(compose)
    envs = [s["environment"] for s in services.values()]
    for env in envs:
        assert set(env) <= set(host_settings.ENVIRONMENT_KEYS)
    for key in ("SECRET_KEY", "AHP_SECRETS_KEY", "DATABASE_URL", "REDIS_URL", "AHP_WORKSPACE_ROOT"):
        assert len({env[key] for env in envs}) == 1, f"{key} differs between nodes"
    assert envs[0]["AHP_SECRETS_KEY"].startswith("${AHP_SECRETS_KEY:?")  # no node starts without it
    for service in services.values():
        assert f"workspaces:{envs[0]['AHP_WORKSPACE_ROOT']}" in service["volumes"]
    assert "workspaces" in compose["volumes"]


def test_the_nodes_fit_the_databases_connection_budget():
    compose = nodes()
    services = host_services(compose)
    env = next(iter(services.values()))["environment"]
    per_process = sum(int(env[key]) for key in ("AHP_ORM_THREADS", "AHP_TOOL_THREADS", "AHP_TOOL_THREADS_ABANDONED")) + 1
    webs = [name for name in services if name.endswith("-web")]
    workers = [name for name in services if name.endswith("-worker")]
    budget = len(webs) * (int(env["AHP_SERVING_PROCESSES"]) * per_process + 1) + len(workers) * per_process
    allowed = int(compose["services"]["postgres"]["command"][-1].split("=")[1])
    assert budget <= allowed - 10  # room for migrations, psql and PostgreSQL's reserved connections
