"""schedule_wakeup: one durable wakeup per chat, fired once per due time by Celery, also after
downtime, and queued behind a running turn like a client's message."""
import subprocess
import sys
import time
from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from sessions_app import actions as session_actions
from sessions_app.models import Turn
from tools_app.families.wakeups import actions
from tools_app.families.wakeups.tasks import fire_wakeups_at_start
from tools_app.models import Wakeup

from ...conftest import PROCESS_DEADLINE_SECONDS, ROOT, child_env, stop
from .helpers import Desk


def chat_of(people, key):
    return session_actions.do_create_session(people.principal("member"), key).chats.get()


def start_worker():
    return subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "ahp", "worker", "--pool", "solo", "--loglevel", "WARNING"],
        env=child_env(), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def wait_for(predicate, seconds=60):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.2)
    return False


def test_it_schedules_replaces_and_stops_one_wakeup_per_chat(acme, host):
    with Desk(host, acme) as desk:
        first = desk.call("schedule_wakeup", {"delaySeconds": 3600, "prompt": "check CI"})
        assert first.startswith("Wakeup due at ") and first.endswith(
            "(in 3600 s). It replaces any earlier wakeup of this chat.")
        desk.call("schedule_wakeup", {"delaySeconds": 120, "prompt": "check CI again"})
        [wakeup] = Wakeup.objects.filter(chat=desk.chat)
        assert wakeup.prompt == "check CI again" and wakeup.person == acme.member
        assert timedelta(seconds=100) < wakeup.due - timezone.now() < timedelta(seconds=121)
        from sessions_app.models import iso

        assert desk.call("schedule_wakeup", {"stop": True}) == f"Cancelled the wakeup that was due at {iso(wakeup.due)}."
        assert not Wakeup.objects.exists()
        assert desk.call("schedule_wakeup", {"stop": True}) == "No wakeup is scheduled in this chat."


def test_it_refuses_delays_outside_a_minute_to_thirty_days(acme, host):
    with Desk(host, acme) as desk:
        assert desk.call("schedule_wakeup", {"delaySeconds": 59, "prompt": "x"}) == (
            "Invalid input for schedule_wakeup at /delaySeconds: 59 is less than the minimum of 60")
        assert desk.call("schedule_wakeup", {"delaySeconds": 2592001, "prompt": "x"}) == (
            "Invalid input for schedule_wakeup at /delaySeconds: 2592001 is greater than the maximum of 2592000")
        assert desk.call("schedule_wakeup", {"prompt": "x"}) == (
            "schedule_wakeup needs delaySeconds and prompt, or stop: true.")
        assert not Wakeup.objects.exists()


@pytest.mark.django_db(transaction=True)
@pytest.mark.e2e
def test_a_real_worker_fires_a_short_wakeup_end_to_end(acme):
    chat = chat_of(acme, "3a1f0c52-7d39-4a57-9d0e-6a4a1c2b3d01")
    wakeup = actions.do_schedule_wakeup(chat, acme.member, "wake up and report", 3600)
    worker = start_worker()
    try:
        with transaction.atomic():
            # Test-only: a due time two seconds away; the tool's own minimum stays 60 s.
            Wakeup.objects.filter(pk=wakeup.pk).update(due=timezone.now() + timedelta(seconds=2))
            actions.schedule_firing(Wakeup.objects.get(pk=wakeup.pk))
        fired = wait_for(lambda: Turn.objects.filter(chat=chat, text="wake up and report", state="complete").exists())
    finally:
        stop(worker)
    assert fired, "the worker never fired the wakeup"
    turn = Turn.objects.get(chat=chat)
    assert turn.sender == acme.member and turn.origin_kind == "automation"
    assert turn.response_parts[-1]["content"] == "wake up and report"
    assert not Wakeup.objects.exists()


@pytest.mark.django_db(transaction=True)
@pytest.mark.e2e
def test_a_wakeup_due_during_downtime_fires_exactly_once_after_restart(acme):
    chat = chat_of(acme, "3a1f0c52-7d39-4a57-9d0e-6a4a1c2b3d02")
    wakeup = actions.do_schedule_wakeup(chat, acme.member, "missed while down", 3600)
    # The host was down when it fell due: no task will come for this due time.
    Wakeup.objects.filter(pk=wakeup.pk).update(due=timezone.now() - timedelta(minutes=5))
    for _ in range(2):  # two starts, or two workers starting: still one turn
        worker = start_worker()
        try:
            wait_for(lambda: Turn.objects.filter(chat=chat, state="complete").exists(), seconds=PROCESS_DEADLINE_SECONDS)
        finally:
            stop(worker)
    assert list(Turn.objects.filter(chat=chat).values_list("text", flat=True)) == ["missed while down"]
    assert not Wakeup.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_row_fires_once_per_due_time(acme):
    chat = chat_of(acme, "3a1f0c52-7d39-4a57-9d0e-6a4a1c2b3d03")
    wakeup = actions.do_schedule_wakeup(chat, acme.member, "once", 3600)
    Wakeup.objects.filter(pk=wakeup.pk).update(due=timezone.now() - timedelta(seconds=1))
    due = Wakeup.objects.get(pk=wakeup.pk).due
    turn = actions.do_fire_wakeup(wakeup.pk, due)
    assert turn is not None and turn.text == "once"
    assert actions.do_fire_wakeup(wakeup.pk, due) is None
    assert Turn.objects.filter(chat=chat).count() == 1


def test_a_wakeup_not_yet_due_does_not_fire(acme):
    chat = chat_of(acme, "3a1f0c52-7d39-4a57-9d0e-6a4a1c2b3d04")
    wakeup = actions.do_schedule_wakeup(chat, acme.member, "later", 3600)
    assert actions.do_fire_wakeup(wakeup.pk, wakeup.due) is None
    assert actions.fire_due_wakeups() == 0 and Wakeup.objects.filter(state="pending").count() == 1


@pytest.mark.django_db(transaction=True)
def test_a_refused_wakeup_stays_stored_and_fires_again_at_the_next_start(acme):
    chat = chat_of(acme, "3a1f0c52-7d39-4a57-9d0e-6a4a1c2b3d05")
    wakeup = actions.do_schedule_wakeup(chat, acme.guest, "guest wakes", 3600)
    Wakeup.objects.filter(pk=wakeup.pk).update(due=timezone.now() - timedelta(seconds=1))
    assert actions.fire_due_wakeups() == 0
    refused = Wakeup.objects.get(pk=wakeup.pk)
    assert (refused.state, refused.refusal) == ("refused", "acme-guest may not chat:send here")
    assert actions.fire_due_wakeups() == 0  # not again in this run
    Wakeup.objects.filter(pk=wakeup.pk).update(person=acme.member)  # the person may send now
    assert fire_wakeups_at_start() == 1
    assert Turn.objects.get(chat=chat).text == "guest wakes" and not Wakeup.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_wakeup_due_while_a_turn_runs_queues_behind_it(acme):
    chat = chat_of(acme, "3a1f0c52-7d39-4a57-9d0e-6a4a1c2b3d06")
    running, _ = session_actions.do_send_message(acme.principal("member"), chat, "busy")
    wakeup = actions.do_schedule_wakeup(chat, acme.member, "after that", 3600)
    Wakeup.objects.filter(pk=wakeup.pk).update(due=timezone.now() - timedelta(seconds=1))
    pending = actions.do_fire_wakeup(wakeup.pk)
    assert pending.text == "after that" and pending.status == "pending" and pending.sender == acme.member
    assert not Wakeup.objects.exists()
