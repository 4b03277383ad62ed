"""Killing the ASGI process of a client mid-call (the disconnect rule itself is shown in
tests/ahp/protocol/test_across_processes.py): nothing else is lost on the surviving process."""
import signal
import time

import pytest
from django.conf import settings
from django.db import connection

from sessions_app.models import ToolCall
from sessions_app.tasks import sweep_due_work

from ..ahp.protocol.harness import AhpClient, default_chat, set_config
from ..ahp.protocol.test_across_processes import two_servers  # noqa: F401 (the fixture)
from ..ahp.protocol.test_client_tools import announce, call_open_file
from .fault_helpers import assert_log_gap_free, completions_per_call, log_marks

pytestmark = [
    pytest.mark.e2e,  # two daphne processes, one killed
    pytest.mark.skipif(
        not settings.REDIS_URL or connection.vendor != "postgresql",
        reason="crossing processes needs the shared channel layer (Redis) and PostgreSQL",
    ),
]


def test_killing_a_clients_process_loses_nothing_on_the_survivor(acme, two_servers):  # noqa: F811
    (port_a, port_b), (process_a, _) = two_servers
    set_config(port_b, acme.tokens["root"], clientToolCallDisconnectTimeoutMs=0)
    before = log_marks()
    ide = AhpClient(port_a, acme.tokens["member"], "ide")
    with AhpClient(port_b, acme.tokens["member"], "alice") as alice, \
            AhpClient(port_b, acme.tokens["member"], "bob") as bob:
        session = alice.create_session()
        chat = default_chat(alice, session)
        alice.subscribe(chat)
        other = bob.create_session()
        other_chat = default_chat(bob, other)
        bob.subscribe(other_chat)
        bob.subscribe(chat)
        announce(ide, session)
        turn, start = call_open_file(alice, chat)
        ide.action("session/inputNeededSet")
        process_a.send_signal(signal.SIGKILL)
        process_a.wait()
        # Meanwhile the survivor's other sessions carry on.
        assert bob.reply_to(bob.start_turn(other_chat, "unaffected")) == "unaffected"
        time.sleep(2)
        sweep_due_work(stale_after_seconds=1.5)
        assert alice.reply_to(turn) == "Client ide disconnected before completing open_file"
        # Another subscriber on the survivor saw the same ending, once.
        done = bob.action("chat/toolCallComplete", toolCallId=start["toolCallId"])["action"]["result"]
        assert done["error"]["message"] == "Client ide disconnected before completing open_file"
        assert bob.reply_to(bob.start_turn(other_chat, "still here")) == "still here"
    assert not ToolCall.objects.filter(completed__isnull=True).exists()
    assert completions_per_call(before) == {start["toolCallId"]: 1}
    assert_log_gap_free(before)
