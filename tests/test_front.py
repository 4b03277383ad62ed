"""The front (`python -m ahp.front`), embedded and on PostgreSQL + Redis: every connection of a
tenant is served by one serving process, another tenant's by another; a serving process that
dies takes only its own tenants' connections with it, and starts again; a token is trusted for
routing only with its secret."""
import contextlib
import os
import signal
import subprocess
import sys
import time

import pytest
from websockets.exceptions import ConnectionClosed

from ahp.front import Tenants, route_of

from .ahp.protocol.harness import AhpClient
from .conftest import PROCESS_DEADLINE_SECONDS, ROOT, child_env, free_port, stop, wait_for_port


@contextlib.contextmanager
def front(log, processes=2):
    """The front on a free port with `processes` serving processes, its output to `log`; (port, its process)."""
    port = free_port()
    with open(log, "w") as output:
        process = subprocess.Popen([sys.executable, "-m", "ahp.front", "-p", str(port), "--processes", str(processes)],
                                   env=child_env(), cwd=ROOT, stdout=output, stderr=subprocess.STDOUT)
    try:
        wait_for_port(port, process, timeout=PROCESS_DEADLINE_SECONDS)
        yield port, process
    finally:
        stop(process)


def serving_pid(client, port):
    """The pid of the process holding the server's end of `client`'s connection."""
    client_port = client.ws.socket.getsockname()[1]
    with open("/proc/net/tcp") as table:
        for line in table.read().splitlines()[1:]:
            fields = line.split()
            if int(fields[1].split(":")[1], 16) == port and int(fields[2].split(":")[1], 16) == client_port:
                inode = fields[9]
    for pid in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{pid}/fd"):
                if os.readlink(f"/proc/{pid}/fd/{fd}") == f"socket:[{inode}]":
                    return int(pid)


def connected(port, token, deadline=PROCESS_DEADLINE_SECONDS):
    """A client connected and initialized through the front, retried while processes start."""
    give_up = time.monotonic() + deadline
    while True:
        try:
            return AhpClient(port, token)
        except Exception:
            if time.monotonic() > give_up:
                raise
            time.sleep(0.5)


@pytest.mark.e2e
def test_each_tenant_is_served_by_a_process_of_its_own(transactional_db, acme, globex, tmp_path):
    with front(tmp_path / "front.log") as (port, process):
        acme_clients = [connected(port, acme.tokens[role]) for role in ("member", "admin", "root")]
        globex_clients = [connected(port, globex.tokens[role]) for role in ("member", "guest")]
        acme_pids = {serving_pid(c, port) for c in acme_clients}
        globex_pids = {serving_pid(c, port) for c in globex_clients}
        assert len(acme_pids) == 1 and len(globex_pids) == 1
        assert acme_pids != globex_pids
        assert process.pid not in acme_pids | globex_pids  # the front is out of the connection's path
        for client in acme_clients + globex_clients:
            assert client.call("ping", {"channel": "ahp-root://"}) is None
            client.close()


@pytest.mark.e2e
def test_a_dead_serving_process_takes_only_its_own_tenants_connections(transactional_db, acme, globex, tmp_path):
    with front(tmp_path / "front.log") as (port, process):
        acme_client, globex_client = connected(port, acme.tokens["member"]), connected(port, globex.tokens["member"])
        os.kill(serving_pid(acme_client, port), signal.SIGKILL)
        with pytest.raises(ConnectionClosed):
            acme_client.call("ping", {"channel": "ahp-root://"}, timeout=10)
        assert globex_client.call("ping", {"channel": "ahp-root://"}) is None
        # acme connects again at once: another process serves it while its own starts again.
        again = connected(port, acme.tokens["member"], deadline=30)
        assert again.call("ping", {"channel": "ahp-root://"}) is None
        again.close()
        globex_client.close()
        deadline = time.monotonic() + PROCESS_DEADLINE_SECONDS
        while "The serving process 1 started again" not in (tmp_path / "front.log").read_text():
            assert time.monotonic() < deadline, "the killed serving process was not started again"
            time.sleep(0.2)
    assert "The serving process 1 exited with code -9; starting it again in 1 s." in (tmp_path / "front.log").read_text()


def test_a_token_routes_only_with_its_secret(transactional_db, acme):  # read on the front's own thread
    import asyncio

    tenants = Tenants()
    good = acme.tokens["member"]
    forged = good.rsplit("_", 1)[0] + "_not-its-secret"
    assert asyncio.run(tenants.of(("token", good))) == acme.tenant.pk
    assert asyncio.run(tenants.of(("token", forged))) is None
    assert asyncio.run(tenants.of(("token", "not a token"))) is None


def test_the_route_is_read_from_the_request_head():
    token = "ahp_0123456789abcdef_secret"
    session = "8c1d3f9e-5b7a-4c2e-9f10-2a3b4c5d6e7f"
    assert route_of(f"GET /ahp?tkn={token} HTTP/1.1\r\nHost: h\r\n\r\n".encode()) == ("token", token)
    assert route_of(f"GET /ahp HTTP/1.1\r\nAuthorization: Bearer {token}\r\n\r\n".encode()) == ("token", token)
    assert route_of(f"POST /ahp-mcp/{session} HTTP/1.1\r\nHost: h\r\n\r\n".encode()) == ("session", session)
    assert route_of(b"GET /admin/ HTTP/1.1\r\nHost: h\r\n\r\n") is None
    assert route_of(b"GET /ahp?tkn=x HTTP/1.1\r\nHost: h\r\n") is None  # the head has not all arrived

