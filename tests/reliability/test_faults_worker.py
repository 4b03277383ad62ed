"""The Celery worker is killed (SIGKILL) holding wakeups and client-tool timeouts that are not
yet due, and started again after they fell due: each fires exactly once. Beat keeps running
beside it, as in production (docker-compose.yml runs it as its own service)."""
import signal
import subprocess
import sys
import time
import uuid
from datetime import timedelta

import pytest
from celery import Celery
from django.conf import settings
from django.db.models import Count
from django.utils import timezone

from ahp.models import WorkerHeartbeat
from sessions_app import actions as session_actions
from sessions_app.models import ToolCall, Turn
from tools_app.families.wakeups import actions as wakeup_actions
from tools_app.models import Wakeup

from ..conftest import PROCESS_DEADLINE_SECONDS, ROOT, child_env, stop
from .fault_helpers import PrivateRedis, assert_log_gap_free, completions_per_call, log_marks, wait_until

pytestmark = pytest.mark.e2e  # Celery worker and beat processes

WAKEUPS = CALLS = 3
DUE_IN = timedelta(seconds=3)


@pytest.fixture
def private_broker(tmp_path):
    """A broker of this test alone, so no other test run's worker takes its tasks: a private
    Redis on the Redis run, a private folder queue on the embedded run. Yields the environment
    for the worker and beat, and a Celery app that sends to the same broker."""
    sender = Celery("faults", set_as_current=False)
    sender.conf.update(task_serializer="json", accept_content=["json"])
    if settings.REDIS_URL:
        redis = PrivateRedis(tmp_path)
        redis.start()
        sender.conf.broker_url = redis.url
        yield {"REDIS_URL": redis.url, "AHP_VAR_DIR": str(tmp_path)}, sender
        redis.stop()
    else:
        queue = tmp_path / "celery" / "queue"
        queue.mkdir(parents=True)
        (tmp_path / "celery" / "processed").mkdir()
        sender.conf.broker_url = "filesystem://"
        sender.conf.broker_transport_options = {"data_folder_in": str(queue), "data_folder_out": str(queue),
                                                "processed_folder": str(tmp_path / "celery" / "processed"),
                                                "store_processed": False}
        yield {"AHP_VAR_DIR": str(tmp_path)}, sender


def start_worker(env, name):
    return subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "ahp", "worker", "--pool", "solo", "-n", f"{name}@faults",
         "--loglevel", "WARNING"],
        env=child_env(**env), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def start_beat(env, tmp_path):
    return subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "ahp", "beat", "--schedule", str(tmp_path / "beat-schedule"),
         "--loglevel", "WARNING"],
        env=child_env(**env), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def ready(name, since):
    return WorkerHeartbeat.objects.filter(hostname=f"{name}@faults", seen__gte=since).exists()


@pytest.mark.django_db(transaction=True)
def test_a_killed_worker_started_again_fires_each_wakeup_and_timeout_exactly_once(acme, private_broker, tmp_path):
    env, sender = private_broker
    member = acme.principal("member")
    before = log_marks()
    chats = [session_actions.do_create_session(member, str(uuid.uuid4())).chats.get() for _ in range(WAKEUPS + CALLS)]
    beat = start_beat(env, tmp_path)
    first = start_worker(env, "first")
    second = None
    try:
        started = timezone.now()
        assert wait_until(lambda: ready("first", started), seconds=PROCESS_DEADLINE_SECONDS), "the first worker never started"

        # Wakeups and client calls falling due in DUE_IN, their tasks in the worker's hands.
        wakeups = []
        for chat in chats[:WAKEUPS]:
            wakeup = wakeup_actions.do_schedule_wakeup(chat, acme.member, f"wake {chat.id}", 3600)
            due = timezone.now() + DUE_IN
            Wakeup.objects.filter(pk=wakeup.pk).update(due=due)  # test-only: the tool's minimum is 60 s
            sender.send_task("tools_app.families.wakeups.tasks.fire_wakeup", (wakeup.pk, due.isoformat()), eta=due)
            wakeups.append(wakeup)
        calls = []
        for chat in chats[WAKEUPS:]:
            # A client's call whose agent is gone with its process: only the worker can end it.
            turn = session_actions.do_start_turn(member, chat, uuid.uuid4(), "open it")
            call = session_actions.do_begin_tool_call(turn, "open_file", {"path": "README.md"}, client_id="ide",
                                                      timeout_ms=int(DUE_IN.total_seconds() * 1000))
            sender.send_task("sessions_app.tasks.expire_tool_call", (str(call.id),), eta=call.deadline)
            calls.append(call)
        time.sleep(1)  # the worker takes the tasks and holds them until they are due
        first.send_signal(signal.SIGKILL)
        first.wait()

        # Everything falls due with no worker: nothing fires.
        time.sleep(DUE_IN.total_seconds())
        assert Wakeup.objects.filter(pk__in=[w.pk for w in wakeups], state="pending").count() == WAKEUPS
        assert ToolCall.objects.filter(id__in=[c.id for c in calls], completed__isnull=True).count() == CALLS

        restarted = time.monotonic()
        second = start_worker(env, "second")

        def all_fired():
            fired = Turn.objects.filter(chat__in=chats[:WAKEUPS], state="complete").count() == WAKEUPS
            return fired and not ToolCall.objects.filter(id__in=[c.id for c in calls], completed__isnull=True).exists()

        assert wait_until(all_fired, seconds=PROCESS_DEADLINE_SECONDS), (
            "the restarted worker did not fire everything: "
            f"{list(Turn.objects.filter(chat__in=chats).values_list('text', 'state'))} "
            f"{list(Wakeup.objects.values_list('state', 'due', 'refusal'))} "
            f"{list(ToolCall.objects.filter(id__in=[c.id for c in calls]).values_list('completed', flat=True))}")
        caught_up = time.monotonic() - restarted
        time.sleep(6)  # a further sweep cycle of beat: nothing fires a second time
    finally:
        for process in (first, second, beat):
            if process is not None:
                stop(process)

    turns = Turn.objects.filter(chat__in=chats[:WAKEUPS]).values("chat").annotate(n=Count("id"))
    assert sorted(t["n"] for t in turns) == [1] * WAKEUPS
    for chat in chats[:WAKEUPS]:
        assert list(Turn.objects.filter(chat=chat).values_list("text", flat=True)) == [f"wake {chat.id}"]
    assert not Wakeup.objects.filter(pk__in=[w.pk for w in wakeups]).exists()
    assert completions_per_call(before) == {str(c.id): 1 for c in calls}
    for call in ToolCall.objects.filter(id__in=[c.id for c in calls]):
        assert call.result["error"]["message"] == "open_file got no answer from ide in 3 s"
    assert_log_gap_free(before)
    print(f"\nworker restart: everything fired {caught_up:.1f}s after the second worker was started")
