"""A turn always ends: when the process running its agent dies, the sweep ends it (chat/error
with a sentence, the calls it waited on ended once), and the chat takes a new turn; a database
that stops while a turn waits on a client loses neither the call nor the turn."""
import glob
import signal
import time

import pytest
from django.conf import settings
from django.db import connection

from sessions_app.actions.turns import RUNNER_GONE
from sessions_app.models import ToolCall, Turn
from sessions_app.tasks import sweep_due_work

from ..ahp.protocol.harness import AhpClient, default_chat
from ..ahp.protocol.test_across_processes import two_servers  # noqa: F401 (the fixture)
from ..ahp.protocol.test_client_tools import announce, call_open_file, complete, setup
from .fault_helpers import completions_per_call, host_on_private_postgres, log_marks, wait_until


def assert_runner_gone_ended(alice, bob_or_ide, turn, call_id):
    error = alice.action("chat/error", turnId=turn)["action"]["error"]
    assert error == {"errorType": "agentError", "message": RUNNER_GONE}
    done = bob_or_ide.action("chat/toolCallComplete", toolCallId=call_id)["action"]["result"]
    assert done["error"] == {"message": RUNNER_GONE, "code": "cancelled"}


def test_a_turn_whose_runner_died_is_ended_by_the_sweep_and_the_chat_takes_a_new_turn(acme, host):
    before = log_marks()
    alice, ide, session, chat = setup(host, acme)
    with alice, ide:
        ide.subscribe(chat)
        turn, start = call_open_file(alice, chat)
        ide.action("session/inputNeededSet")
        # As if its runner had died: the turn names a process that renews no lease.
        Turn.objects.filter(id=turn).update(runner="a-process-that-died")
        sweep_due_work(stale_after_seconds=0)
        assert_runner_gone_ended(alice, ide, turn, start["toolCallId"])
        sweep_due_work(stale_after_seconds=0)  # a second sweep finds nothing left to end
        assert alice.reply_to(alice.start_turn(chat, "again")) == "again"
    assert completions_per_call(before) == {start["toolCallId"]: 1}
    assert Turn.objects.get(id=turn).state == "error"


def test_a_turn_of_a_live_process_is_left_running_by_the_sweep(acme, host):
    alice, ide, session, chat = setup(host, acme)
    with alice, ide:
        turn, start = call_open_file(alice, chat)
        ide.action("session/inputNeededSet")
        assert wait_until(lambda: Turn.objects.filter(id=turn).exclude(runner="").exists())
        time.sleep(0.1)
        sweep_due_work(stale_after_seconds=60)
        complete(ide, chat, turn, start["toolCallId"], text="still mine")
        assert alice.reply_to(turn) == "still mine"


pg_and_redis = pytest.mark.skipif(
    not settings.REDIS_URL or connection.vendor != "postgresql",
    reason="crossing processes needs the shared channel layer (Redis) and PostgreSQL")


@pytest.mark.e2e  # two daphne processes, one killed
@pg_and_redis
def test_killing_the_process_running_a_turn_mid_call_ends_the_turn_by_the_sweep(acme, two_servers):  # noqa: F811
    (port_a, port_b), (process_a, _) = two_servers
    before = log_marks()
    alice = AhpClient(port_a, acme.tokens["member"], "alice")
    with AhpClient(port_b, acme.tokens["member"], "ide") as ide, AhpClient(port_b, acme.tokens["member"], "bob") as bob:
        session = alice.create_session()
        chat = default_chat(alice, session)
        alice.subscribe(chat)
        announce(ide, session)
        ide.subscribe(chat)
        bob.subscribe(session)
        bob.subscribe(chat)
        turn, start = call_open_file(alice, chat)  # the turn runs on process A, the tool on B
        ide.action("session/inputNeededSet")
        process_a.send_signal(signal.SIGKILL)
        process_a.wait()
        time.sleep(2)
        sweep_due_work(stale_after_seconds=1.5)
        assert_runner_gone_ended(bob, ide, turn, start["toolCallId"])
        assert bob.reply_to(bob.start_turn(chat, "after the crash")) == "after the crash"
    assert not ToolCall.objects.filter(completed__isnull=True).exists()
    assert completions_per_call(before) == {start["toolCallId"]: 1}


@pytest.mark.e2e  # a private PostgreSQL, stopped, and daphne
@pytest.mark.skipif(connection.vendor != "postgresql" or not glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                    reason="stopping PostgreSQL needs the PostgreSQL run (DATABASE_URL) and its server binaries")
def test_a_database_stopped_while_a_turn_waits_on_a_client_loses_neither(acme, transactional_db, tmp_path):
    with host_on_private_postgres(tmp_path) as (cluster, port):
        with AhpClient(port, acme.tokens["member"], "alice") as alice, \
                AhpClient(port, acme.tokens["member"], "ide") as ide:
            session = alice.create_session()
            chat = default_chat(alice, session)
            alice.subscribe(chat)
            announce(ide, session)
            turn, start = call_open_file(alice, chat)
            ide.action("session/inputNeededSet")
            cluster.stop()
            time.sleep(6)  # the waiter's process reads its waiting calls' rows meanwhile, and fails to
            cluster.start()
            complete(ide, chat, turn, start["toolCallId"], text="after the outage")
            assert alice.reply_to(turn, timeout=30) == "after the outage"
            assert alice.reply_to(alice.start_turn(chat, "next")) == "next"
        log = (tmp_path / f"daphne-{port}.log").read_text()
        assert "Task exception was never retrieved" not in log


def test_a_terminal_of_a_dead_process_exits_and_one_of_a_live_process_stays(acme, host):
    from datetime import timedelta

    from django.utils import timezone

    from sessions_app.events.log import PROCESS
    from sessions_app.models import Session
    from tools_app.families.terminals.models import Terminal
    from tools_app.families.terminals.tasks import sweep_orphaned_terminals

    with AhpClient(host.port, acme.tokens["member"], "alice") as alice:
        session = Session.objects.get(id=alice.create_session().removeprefix("ahp-session:/"))
        long_ago = timezone.now() - timedelta(minutes=5)
        asked, unasked, live = (
            Terminal.objects.create(session=session, cwd="file:///tmp", process=process, created=long_ago)
            for process in ("a-process-that-died", "another-process-that-died", PROCESS))
        # Asked for, a dead process's terminal says at once that it ended; a live one's runs on.
        assert alice.subscribe(asked.uri)["exitCode"] == -1
        assert "exitCode" not in alice.subscribe(live.uri)
        # The sweep ends the one no one asked for.
        assert wait_until(lambda: sweep_orphaned_terminals(stale_after_seconds=5) == 1)
        assert sweep_orphaned_terminals(stale_after_seconds=5) == 0
        assert [Terminal.objects.get(pk=t.pk).exit_code for t in (asked, unasked, live)] == [-1, -1, None]
