"""Every change of a chat's durable wakeup: one `do_*` function each."""
import logging
from datetime import timedelta

from celery import current_app
from django.db import transaction
from django.utils import timezone

from grants.models import Principal
from kernel.after_commit import after_commit
from kernel.refusals import Refused
from sessions_app import actions as session_actions
from sessions_app.actions import check_message_text

from ...turn_launcher import launch_turn
from .models import Wakeup

logger = logging.getLogger(__name__)

FIRE_WAKEUP_TASK = "tools_app.families.wakeups.tasks.fire_wakeup"


def schedule_firing(wakeup):
    """After commit, queue the task that fires `wakeup` at its due time (the sweep is the net)."""
    pk, due = wakeup.pk, wakeup.due
    # By name: the task module calls these actions, so importing it here would be a cycle.
    after_commit(f"queueing wakeup {pk} (the sweep fires it)",
                 lambda: current_app.send_task(FIRE_WAKEUP_TASK, (pk, due.isoformat()), eta=due))


@transaction.atomic
def do_schedule_wakeup(chat, person, prompt, delay_seconds):
    """One wakeup per chat: a new one replaces whatever was scheduled."""
    check_message_text(prompt)  # refused now, not when it fires
    due = timezone.now() + timedelta(seconds=delay_seconds)
    wakeup, _ = Wakeup.objects.update_or_create(
        chat=chat, defaults={"person": person, "prompt": prompt, "due": due, "state": "pending", "refusal": "",
                             "created": timezone.now()})
    schedule_firing(wakeup)
    return wakeup


@transaction.atomic
def do_cancel_wakeup(chat):
    wakeup = Wakeup.objects.select_for_update().filter(chat=chat).first()
    if wakeup is not None:
        wakeup.delete()
    return wakeup


def do_fire_wakeup(pk, due=None):
    """Fire a due wakeup once: in one transaction, a conditional DELETE claims the row and its
    turn begins (or its prompt queues behind the running turn), as a client's message would.
    A refused firing keeps the row, refused, for the next start. Answers the turn begun, the
    queued message, or None."""
    try:
        with transaction.atomic():
            wakeup = Wakeup.objects.select_related("chat__session__tenant", "person").filter(
                pk=pk, state="pending", due__lte=timezone.now()).first()
            if wakeup is None or (due is not None and wakeup.due != due):
                return None
            claimed = Wakeup.objects.filter(pk=pk, state="pending", due=wakeup.due).delete()[0]
            if claimed != 1:
                return None  # another worker fired this due time
            session = wakeup.chat.session
            principal = (Principal.for_person(session.tenant, wakeup.person) if wakeup.person is not None
                         else Principal(session.tenant, None, ("session:read",)))
            turn, pending = session_actions.do_send_message(principal, wakeup.chat, wakeup.prompt,
                                                            origin_kind="automation")
    except Refused as refusal:
        Wakeup.objects.filter(pk=pk, state="pending").update(state="refused", refusal=refusal.sentence)
        logger.info("Wakeup %s refused: %s", pk, refusal.sentence)
        return None
    if turn is not None:
        launch_turn(turn.id)
        return turn
    return pending


def fire_due_wakeups():
    fired = 0
    for pk, due in Wakeup.objects.filter(state="pending", due__lte=timezone.now()).values_list("pk", "due"):
        if do_fire_wakeup(pk, due) is not None:
            fired += 1
    return fired


def do_release_refused_wakeups():
    """At a start, refused wakeups get another chance."""
    return Wakeup.objects.filter(state="refused").update(state="pending", refusal="")
