"""Two real ASGI server processes sharing PostgreSQL and Redis: the client that runs a tool is
on one, the agent waiting for it on the other."""
import signal
import subprocess
import sys
import time

import pytest
from django.conf import settings
from django.db import connection

from sessions_app.tasks import sweep_due_work

from ...conftest import ROOT, child_env, free_port, stop, wait_for_port
from .harness import AhpClient, default_chat, set_config
from .test_client_tools import announce, call_open_file, complete

pytestmark = [
    pytest.mark.e2e,  # two daphne processes
    pytest.mark.skipif(
        not settings.REDIS_URL or connection.vendor != "postgresql",
        reason="crossing processes needs the shared channel layer (Redis) and PostgreSQL",
    ),
]


@pytest.fixture
def two_servers(transactional_db):
    processes, ports = [], []
    for _ in range(2):
        port = free_port()
        processes.append(subprocess.Popen(
            [sys.executable, "-m", "ahp.serve", "-b", "127.0.0.1", "-p", str(port), "ahp.asgi:application"],
            env=child_env(AHP_HEARTBEAT_SECONDS="0.5"), cwd=ROOT,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        ))
        ports.append(port)
    try:
        for port, process in zip(ports, processes, strict=True):
            wait_for_port(port, process)
        yield ports, processes
    finally:
        for process in processes:
            stop(process)


def test_a_client_on_one_process_answers_an_agent_on_the_other(acme, two_servers):
    (port_a, port_b), _ = two_servers
    with AhpClient(port_a, acme.tokens["member"], "ide") as ide, AhpClient(port_b, acme.tokens["member"], "alice") as alice:
        session = alice.create_session()
        chat = default_chat(alice, session)
        alice.subscribe(chat)
        announce(ide, session)
        turn, start = call_open_file(alice, chat)
        request = ide.action("session/inputNeededSet")["action"]["request"]
        complete(ide, chat, turn, request["toolCall"]["toolCallId"], text="from the other process")
        assert alice.reply_to(turn) == "from the other process"


def test_killing_the_clients_process_mid_call_fails_the_call_by_the_disconnect_rule(acme, two_servers):
    (port_a, port_b), (process_a, _) = two_servers
    set_config(port_b, acme.tokens["root"], clientToolCallDisconnectTimeoutMs=0)
    ide = AhpClient(port_a, acme.tokens["member"], "ide")
    with AhpClient(port_b, acme.tokens["member"], "alice") as alice:
        session = alice.create_session()
        chat = default_chat(alice, session)
        alice.subscribe(chat)
        announce(ide, session)
        turn, start = call_open_file(alice, chat)
        ide.action("session/inputNeededSet")
        process_a.send_signal(signal.SIGKILL)
        process_a.wait()
        time.sleep(2)
        sweep_due_work(stale_after_seconds=1.5)
        assert alice.reply_to(turn) == "Client ide disconnected before completing open_file"
        # The surviving process still serves everything else.
        assert alice.call("ping", {"channel": "ahp-root://"}) is None
