"""The sandbox's only way out: its forwarding proxy reaches the destinations it was opened with
and nothing else; never the host's own services, whatever the allow-list says."""
import contextlib
import http.server
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from django.conf import settings

from sandbox.bubblewrap import PROXY_PORT, Sandbox, SandboxUnavailable, end_sandbox
from sandbox.proxy import PROXIES, Destinations, StandIn, refusal_sentence

from ..ahp.mcp.helpers import wait_until
from ..conftest import free_port

FETCH = """
import sys, urllib.request, urllib.error
try:
    print(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())
except urllib.error.HTTPError as e:
    print(e.code, e.read().decode())
except OSError as e:
    print("failed", e)
"""


# A raw request to the proxy from inside the sandbox (urllib hides a refused CONNECT's body).
RAW = f"""
import socket, sys
with socket.create_connection(("127.0.0.1", {PROXY_PORT}), timeout=10) as proxy:
    proxy.sendall(sys.argv[1].encode())
    answer = b"".join(iter(lambda: proxy.recv(65536), b""))
head, _, body = answer.decode().partition("\\r\\n\\r\\n")
print(head.split("\\r\\n")[0], body)
"""


@contextlib.contextmanager
def hello_server():
    class Hello(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = f"hello from {self.path}".encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Hello)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def web():
    with hello_server() as port:
        yield port


def fetch(sandbox, url):
    done = sandbox.run([sys.executable, "-c", FETCH, url], timeout=30)
    return done.stdout.strip() or done.stderr


def connect(sandbox, host, port):
    """The proxy's answer to `CONNECT host:port` from inside the sandbox: status line and body."""
    request = f"CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n"
    done = sandbox.run([sys.executable, "-c", RAW, request], timeout=30)
    return done.stdout.strip() or done.stderr


@pytest.fixture
def key(request, db):  # the outbound rule reads the operator's allow-list rows
    name = f"test-{request.node.name[:40]}-{os.getpid()}"
    yield name
    end_sandbox(name)


def test_a_sandbox_in_a_folder_deeper_than_a_socket_address_holds_still_reaches_out(
        settings, tmp_path, web, key, allow_loopback):
    settings.VAR_DIR = tmp_path / ("deep-" * 20)  # a host installed in a long path
    sandbox = Sandbox(key, read_only=(sys.prefix,), destinations=(("127.0.0.1", web),))
    assert len(str(sandbox.folder / "proxies" / ("x" * 32) / "proxy.sock")) > 108  # what a Unix socket's address holds
    assert fetch(sandbox, f"http://127.0.0.1:{web}/deep") == "hello from /deep"


def test_a_listed_destination_is_reached_and_any_other_is_refused_with_the_sentence(web, key, allow_loopback):
    other = free_port()
    sandbox = Sandbox(key, read_only=(sys.prefix,), destinations=(("127.0.0.1", web),))
    assert fetch(sandbox, f"http://127.0.0.1:{web}/mcp") == "hello from /mcp"
    assert fetch(sandbox, f"http://127.0.0.1:{other}/") == f"403 {refusal_sentence('127.0.0.1', other)}"


def test_the_outbound_rule_refuses_a_private_address_even_when_listed(web, key):
    sandbox = Sandbox(key, read_only=(sys.prefix,), destinations=(("127.0.0.1", web),))
    assert fetch(sandbox, f"http://127.0.0.1:{web}/") == (
        f"403 The host does not connect to 127.0.0.1:{web}: it is a private address and not allow-listed.")
    own = Sandbox(key, read_only=(sys.prefix,), host_destinations=(("127.0.0.1", web),))
    assert fetch(own, f"http://127.0.0.1:{web}/ahp-mcp/x") == "hello from /ahp-mcp/x"  # the host's own endpoint


def test_without_destinations_there_is_no_network_at_all(web, key):
    sandbox = Sandbox(key, read_only=(sys.prefix,))
    assert fetch(sandbox, f"http://127.0.0.1:{web}/").startswith("failed")


def test_without_bubblewrap_nothing_runs_at_all(monkeypatch, key, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap on it
    with pytest.raises(SandboxUnavailable) as refused:
        Sandbox(key).run(["/bin/true"])
    assert str(refused.value) == (
        "This host cannot run commands for a tenant: bubblewrap (bwrap) is not installed, and nothing a tenant's "
        "session asks for runs outside a sandbox.")


def test_with_a_loopback_allow_list_the_hosts_own_port_is_refused_and_another_loopback_server_is_not(
        web, key, allow_loopback, host):
    assert httpx.get(f"http://127.0.0.1:{host.port}/healthz").status_code == 200  # the host serves here
    sandbox = Sandbox(key, read_only=(sys.prefix,), destinations=(
        ("127.0.0.1", host.port), ("localhost", host.port), ("127.0.0.1", web)))
    assert fetch(sandbox, f"http://127.0.0.1:{host.port}/admin/") == (
        f"403 The host does not connect to 127.0.0.1:{host.port}: it is one of the host's own services.")
    assert fetch(sandbox, f"http://localhost:{host.port}/admin/") == (
        f"403 The host does not connect to localhost:{host.port}: it is one of the host's own services.")
    assert connect(sandbox, "127.0.0.1", host.port) == (
        f"HTTP/1.1 403 Forbidden The host does not connect to 127.0.0.1:{host.port}: it is one of the host's own "
        "services.")
    assert fetch(sandbox, f"http://127.0.0.1:{web}/mcp") == "hello from /mcp"


def database_and_redis():
    """(host, port) of this run's PostgreSQL and Redis servers; the embedded host has neither."""
    found = []
    database = settings.DATABASES["default"]
    if database["ENGINE"].endswith("postgresql"):
        found.append((database["HOST"] or "localhost", int(database["PORT"] or 5432)))
    if settings.REDIS_URL:
        redis = urlsplit(settings.REDIS_URL)
        found.append((redis.hostname or "localhost", redis.port or 6379))
    return found


def test_with_a_loopback_allow_list_the_hosts_database_and_redis_are_refused(key, allow_loopback):
    services = database_and_redis()
    if not services:
        pytest.skip("the embedded host has no database server and no Redis")
    for host, port in services:
        with socket.create_connection((host, port), timeout=5):
            pass  # the host reaches it
        sandbox = Sandbox(key, read_only=(sys.prefix,), destinations=((host, port), ("localhost", port)))
        assert fetch(sandbox, f"http://{host}:{port}/") == (
            f"403 The host does not connect to {host}:{port}: it is one of the host's own services.")
        assert fetch(sandbox, f"http://localhost:{port}/") == (
            f"403 The host does not connect to localhost:{port}: it is one of the host's own services.")
        assert connect(sandbox, host, port) == (
            f"HTTP/1.1 403 Forbidden The host does not connect to {host}:{port}: it is one of the host's own "
            "services.")


def test_an_allow_list_entry_with_a_port_lets_that_port_alone(web, key, settings):
    settings.AHP_OUTBOUND_ALLOW = f"127.0.0.1/32:{web}"
    with hello_server() as other:
        sandbox = Sandbox(key, read_only=(sys.prefix,), destinations=(("127.0.0.1", web), ("127.0.0.1", other)))
        assert fetch(sandbox, f"http://127.0.0.1:{web}/mcp") == "hello from /mcp"
        assert fetch(sandbox, f"http://127.0.0.1:{other}/mcp") == (
            f"403 The host does not connect to 127.0.0.1:{other}: it is a private address and not allow-listed.")


def test_a_server_a_client_declared_needs_an_allow_list_entry_naming_its_port(web, key, settings):
    settings.AHP_OUTBOUND_ALLOW = "127.0.0.1/32"
    sandbox = Sandbox(key, read_only=(sys.prefix,), destinations=(("127.0.0.1", web, True),))
    assert fetch(sandbox, f"http://127.0.0.1:{web}/mcp") == (
        f"403 The host does not connect to 127.0.0.1:{web} for a client's server: a private address needs an "
        "allow-list entry with that port.")
    settings.AHP_OUTBOUND_ALLOW = f"127.0.0.1/32:{web}"
    assert fetch(sandbox, f"http://127.0.0.1:{web}/mcp") == "hello from /mcp"


def test_the_hosts_tools_endpoint_is_reached_at_its_own_path_alone(web, key):
    sandbox = Sandbox(key, read_only=(sys.prefix,), host_destinations=(("127.0.0.1", web, "/ahp-mcp/s1"),))
    assert fetch(sandbox, f"http://127.0.0.1:{web}/ahp-mcp/s1") == "hello from /ahp-mcp/s1"
    refused = f"This sandbox may reach only /ahp-mcp/s1 on 127.0.0.1:{web}: the session's tools endpoint."
    assert fetch(sandbox, f"http://127.0.0.1:{web}/admin/") == f"403 {refused}"
    assert connect(sandbox, "127.0.0.1", web) == f"HTTP/1.1 403 Forbidden {refused}"


def through(socket_path, url):
    """GET `url` through the proxy socket at `socket_path`, as a sandbox's bridge would: the
    status code and body."""
    with socket.socket(socket.AF_UNIX) as proxy:
        proxy.settimeout(10)
        proxy.connect(str(socket_path))
        proxy.sendall(f"GET {url} HTTP/1.1\r\nHost: {urlsplit(url).netloc}\r\n\r\n".encode())
        answer = b"".join(iter(lambda: proxy.recv(65536), b""))
    head, _, body = answer.decode().partition("\r\n\r\n")
    return f"{head.split(' ', 2)[1]} {body}"


def holding(lifeline):
    """A process holding `lifeline` open as a launch does (bubblewrap and the sandbox inherit it)."""
    return subprocess.Popen(["/bin/sh", "-c", 'exec 4<> "$0" && exec sleep 60', str(lifeline)])


def test_each_launch_has_a_socket_and_destinations_of_its_own_closed_when_it_ends(web, db, allow_loopback):
    folder = Path(tempfile.mkdtemp(prefix="ahp-launches-"))
    agent = PROXIES.serve_launch(folder, Destinations([("127.0.0.1", web)]))
    terminal = PROXIES.serve_launch(folder, Destinations([]))
    holders = [holding(agent.lifeline), holding(terminal.lifeline)]
    try:
        assert agent.socket != terminal.socket
        assert through(agent.socket, f"http://127.0.0.1:{web}/x") == "200 hello from /x"
        assert through(terminal.socket, f"http://127.0.0.1:{web}/x") == (
            f"403 This sandbox may not connect to 127.0.0.1:{web}: it is not one of the destinations its session "
            "was given.")
        holders[0].kill()  # the agent's sandbox ends: its socket closes, the terminal's stays
        holders[0].wait()
        wait_until(lambda: not agent.socket.exists(), describe="the ended launch's socket closing")
        with pytest.raises(OSError):
            through(agent.socket, f"http://127.0.0.1:{web}/x")
        assert through(terminal.socket, f"http://127.0.0.1:{web}/x").startswith("403 ")
        PROXIES.stop_under(folder)  # the session ends: every launch's socket with it
        wait_until(lambda: not terminal.socket.exists(), describe="the session's launch sockets closing")
    finally:
        for holder in holders:
            holder.kill()
            holder.wait()
        shutil.rmtree(folder, ignore_errors=True)


def test_a_stand_in_is_sent_on_with_the_credentials_the_sandbox_never_held(key, allow_loopback):
    heard = []

    class Echo(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            heard.append((self.path, self.headers.get("Host"), self.headers.get("x-api-key")))
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Echo)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    model = StandIn("model", f"http://127.0.0.1:{port}/base?key=q-only-the-proxy-holds",
                    (("x-api-key", "sk-only-the-proxy-holds"),))
    try:
        sandbox = Sandbox(key, read_only=(sys.prefix,), stand_ins=(model,))
        inside = model.inside(f"http://127.0.0.1:{port}/base/v1/messages?beta=true")
        assert inside == "http://model.ahp-sandbox.invalid/base/v1/messages"  # the query is the proxy's to add
        inside += "?beta=true"
        # Whatever key the sandbox sends is replaced, never added to.
        done = sandbox.run([sys.executable, "-c", "import sys, urllib.request; print(urllib.request.urlopen("
                            "urllib.request.Request(sys.argv[1], headers={'x-api-key': 'guessed'})).read().decode())",
                            inside], timeout=30)
        assert done.stdout.strip() == "ok", done.stderr
        assert heard == [("/base/v1/messages?beta=true&key=q-only-the-proxy-holds", f"127.0.0.1:{port}",
                          "sk-only-the-proxy-holds")]
        # A launch not given the stand-in reaches nothing by its name.
        other = Sandbox(key, read_only=(sys.prefix,), destinations=(("127.0.0.1", port),))
        assert fetch(other, inside) == f"403 {refusal_sentence('model.ahp-sandbox.invalid', 80)}"
    finally:
        server.shutdown()
        server.server_close()
