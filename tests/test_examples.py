"""examples/client.py runs as a reader runs it: a process of its own against a real host."""
import subprocess
import sys

import pytest

from .conftest import PROCESS_DEADLINE_SECONDS, ROOT

pytestmark = pytest.mark.e2e  # a daphne process and the example's own


def run_client(port: int, token: str, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "examples/client.py", f"ws://127.0.0.1:{port}/ahp", token, *extra],
                          cwd=ROOT, capture_output=True, text=True, timeout=PROCESS_DEADLINE_SECONDS)


def test_the_example_client_answers_the_agents_call_to_its_own_tool(acme, live_server_process):
    """The echo agent calls the client's `shout`; the reply it prints is the client's result."""
    done = run_client(live_server_process, acme.tokens["member"], "--text", "hello, host")
    assert (done.returncode, done.stdout, done.stderr) == (0, "HELLO, HOST!\n", "")


def test_the_example_client_says_so_when_its_token_is_refused(acme, live_server_process):
    done = run_client(live_server_process, "ahp_not_a_token")
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == "The host refused the connection (HTTP 403); check the token.\n"
