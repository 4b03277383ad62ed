"""A tenant's commands run in the session's sandbox, proved from inside it.

The probe is an operator-defined stdio MCP server that tenant B picks by name in its
mcpServers; B's echo agent calls it in a real session over a real socket, exactly as a model
would. What it reports is what any tenant code would see."""
import json
import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from django.conf import settings

from sandbox import identity
from tools_app.models import StdioServer

from ..ahp.mcp.helpers import wait_until
from ..ahp.protocol.harness import AhpClient, default_chat, set_config

PROBE = textwrap.dedent('''
    import json, os, socket, subprocess, time
    from mcp.server.fastmcp import FastMCP

    app = FastMCP("probe")

    def reachable(port):
        s = socket.socket()
        s.settimeout(2)
        try:
            s.connect(("127.0.0.1", port))
            return True
        except OSError:
            return False
        finally:
            s.close()

    def readable(path):
        try:
            with open(path, "rb") as f:
                f.read(1)
            return True
        except OSError:
            return False

    @app.tool()
    def look(paths: list[str], folders: list[str], own_folder: str) -> str:
        """Report what this process can see and reach."""
        with open(os.path.join(own_folder, "written-inside.txt"), "w") as f:
            f.write("ok")
        return json.dumps({
            "uid": os.getuid(), "euid": os.geteuid(), "env": sorted(os.environ),
            "readable": {p: readable(p) or os.path.exists(p) for p in paths},
            "listing": {d: sorted(os.listdir(d)) if os.path.isdir(d) else None for d in folders},
            "postgres": reachable(5432), "redis": reachable(6379),
        })

    @app.tool()
    def hang() -> str:
        """Start a long-lived child and wait."""
        subprocess.Popen(["sleep", "617"])
        time.sleep(120)
        return "woke"

    if __name__ == "__main__":
        app.run()
''')
SANDBOX_ENV = {"HOME", "LANG", "PATH", "PWD", "TMPDIR", "USER", "LC_CTYPE", "GIT_CONFIG_COUNT", "GIT_CONFIG_KEY_0",
               "GIT_CONFIG_VALUE_0"}


@pytest.fixture
def probe(tmp_path, db):
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    tmp_path.chmod(0o755)
    StdioServer.objects.create(name="probe", command=sys.executable, args=[str(script)],
                               read_only_paths=[str(tmp_path), sys.prefix])
    return {"type": "stdio", "server": "probe"}


def workspace(tenant, name, secret=None):
    folder = Path(settings.AHP_WORKSPACE_ROOT) / tenant / name
    folder.mkdir(parents=True, exist_ok=True)
    if secret:
        (folder / "secret.txt").write_text(secret)
    return folder


def call(client, chat, tool, arguments, timeout=60):
    return client.reply_to(client.start_turn(chat, f"/call {tool} {json.dumps(arguments)}"), timeout=timeout)


def sandbox_ids():
    first, _, last = settings.AHP_SANDBOX_IDS.partition("-")
    return range(int(first), int(last) + 1)


def sandboxed_processes(pattern):
    """Processes matching `pattern` that run as a sandbox user."""
    found = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True).stdout.split()
    return [pid for pid in found if Path(f"/proc/{pid}").exists() and Path(f"/proc/{pid}").stat().st_uid in sandbox_ids()]


def test_a_tenant_may_not_name_a_command_for_the_host_to_run(acme, host):
    with AhpClient(host.port, acme.tokens["root"], "operator") as operator:
        operator.subscribe("ahp-root://")
        operator.dispatch("ahp-root://", {"type": "root/configChanged", "config": {"mcpServers": {
            "probe": {"type": "stdio", "command": "/bin/sh", "args": ["-c", "id > /tmp/owned"]}}}})
        rejected = operator.action("root/configChanged", rejected=True)
    assert rejected["rejectionReason"] == (
        "mcpServers.probe: a tenant cannot name a command for the host to run; pick one of the operator's stdio "
        'servers with {"type": "stdio", "server": "<name>"}.')


@pytest.mark.skipif(os.geteuid() != 0, reason="an unprivileged sandbox user needs a host run as root")
def test_inside_the_sandbox_nothing_of_the_host_or_another_tenant_is_there(acme, globex, host, probe, monkeypatch):
    monkeypatch.setenv("AHP_CANARY_SECRET", "the host's own environment")
    theirs = workspace("acme", "repo", secret="acme's code")
    mine = workspace("globex", "work")
    database = settings.DATABASES["default"]
    paths = [str(theirs / "secret.txt"), str(settings.BASE_DIR / "manage.py"), str(settings.VAR_DIR / "celery"),
             "/etc/shadow", "/root/.bashrc"]
    # Only the way down to its own folder exists: no other tenant's or session's folder beside it.
    root = Path(settings.AHP_WORKSPACE_ROOT)
    folders = {str(root): ["globex"], str(root / "acme"): None, str(settings.VAR_DIR): None}
    if database["ENGINE"].endswith("sqlite3"):
        paths.append(str(database["TEST"]["NAME"]))
    set_config(host.port, globex.tokens["root"], mcpServers={"probe": probe})
    with AhpClient(host.port, acme.tokens["member"]) as alice, AhpClient(host.port, globex.tokens["member"]) as gus:
        alices = alice.create_session(workingDirectories=[theirs.as_uri()])
        uri = gus.create_session(workingDirectories=[mine.as_uri()])
        chat = default_chat(gus, uri)
        gus.subscribe(chat)
        wait_until(lambda: "probe_look" in gus.reply_to(gus.start_turn(chat, "/tools")).split("\n"),
                   describe="the probe's tools offered")
        seen = json.loads(call(gus, chat, "probe_look", {"paths": paths, "folders": list(folders), "own_folder": str(mine)}))
    own = identity.existing_sandbox_user(uri.rsplit("/", 1)[-1])
    assert seen["uid"] == seen["euid"] == own and own in sandbox_ids()
    assert own not in (identity.existing_sandbox_user(alices.rsplit("/", 1)[-1]), identity.tenant_group(acme.tenant.id))
    assert set(seen["env"]) <= SANDBOX_ENV  # no DATABASE_URL, SECRET_KEY, REDIS_URL, canary, tokens
    assert seen["readable"] == {p: False for p in paths}
    assert seen["listing"] == folders
    assert (seen["postgres"], seen["redis"]) == (False, False)
    written = mine / "written-inside.txt"
    assert written.read_text() == "ok"
    assert (written.stat().st_uid, written.stat().st_gid) == (own, identity.tenant_group(globex.tenant.id))


def test_the_hosts_services_are_listening_where_the_sandbox_cannot_reach_them():
    """The probe's `False` above means something only if the host itself does reach them."""
    for port in (5432, 6379):
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            pass


@pytest.mark.skipif(os.geteuid() != 0, reason="an unprivileged sandbox user needs a host run as root")
def test_what_a_session_started_dies_with_the_session(acme, host, probe):
    set_config(host.port, acme.tokens["root"], mcpServers={"probe": probe})
    with AhpClient(host.port, acme.tokens["member"]) as alice:
        uri = alice.create_session(workingDirectories=[workspace("acme", "hang").as_uri()])
        chat = default_chat(alice, uri)
        alice.subscribe(chat)
        wait_until(lambda: "probe_hang" in alice.reply_to(alice.start_turn(chat, "/tools")).split("\n"),
                   describe="the probe's tools offered")
        alice.start_turn(chat, "/call probe_hang {}")
        wait_until(lambda: sandboxed_processes("sleep 617"), timeout=30, describe="the probe's child running")
        assert alice.call("disposeSession", {"channel": uri}) is None
        deadline = time.monotonic() + 10
        while sandboxed_processes("sleep 617") and time.monotonic() < deadline:
            time.sleep(0.1)
    assert sandboxed_processes("sleep 617") == []
