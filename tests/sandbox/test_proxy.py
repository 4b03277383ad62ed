"""The sandbox's only way out: its forwarding proxy reaches the destinations it was opened with
and nothing else."""
import http.server
import os
import sys
import threading

import pytest

from sandbox.bubblewrap import Sandbox, SandboxUnavailable, end_sandbox
from sandbox.proxy import refusal_sentence

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


@pytest.fixture
def web():
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
    yield server.server_address[1]
    server.shutdown()


def fetch(sandbox, url):
    done = sandbox.run([sys.executable, "-c", FETCH, url], timeout=30)
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
    assert len(str(sandbox.folder / "control" / "proxy.sock")) > 108  # what a Unix socket's address holds
    assert fetch(sandbox, f"http://127.0.0.1:{web}/deep") == "hello from /deep"


def test_a_listed_destination_is_reached_and_any_other_is_refused_with_the_sentence(web, key, allow_loopback):
    other = free_port()
    sandbox = Sandbox(key, read_only=(sys.prefix,), destinations=(("127.0.0.1", web),))
    assert fetch(sandbox, f"http://127.0.0.1:{web}/mcp") == "hello from /mcp"
    assert fetch(sandbox, f"http://127.0.0.1:{other}/") == f"403 {refusal_sentence('127.0.0.1', other)}"


def test_the_outbound_rule_refuses_a_private_address_even_when_listed(web, key):
    sandbox = Sandbox(key, read_only=(sys.prefix,), destinations=(("127.0.0.1", web),))
    assert fetch(sandbox, f"http://127.0.0.1:{web}/") == (
        "403 The host does not connect to 127.0.0.1: it is a private address and not allow-listed.")
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
