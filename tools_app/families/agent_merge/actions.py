"""Every change Agent Merge makes: one `do_*` function each."""
import uuid

from django.db import transaction
from django.utils import timezone

from kernel.refusals import Refused
from sessions_app import actions as session_actions

from .models import AgentMergeConfig, AgentMergeRepair, CIEvidence, DeferredRerun, PullRequestWatch

PENDING_REVIEW = ("A reply landed in the person's pending review: Agent Merge stopped watching this pull request until "
                  "they submit that review and turn it on again.")
AGENT_MERGE_OPTIONS = {"addressReviews": "address_reviews", "fixCI": "fix_ci", "resolveConflicts": "resolve_conflicts",
                       "mergePullRequest": "merge_pull_request"}


@transaction.atomic
def do_set_agent_merge(session, folder, enabled, options):
    """No grant of its own, as in the reference host: it is offered to the session's agent,
    and whoever's turn calls it was already let into the chat."""
    config, _ = AgentMergeConfig.objects.select_for_update().get_or_create(session=session, folder=folder)
    config.enabled = enabled
    for wire, column in AGENT_MERGE_OPTIONS.items():
        if wire in options:
            setattr(config, column, options[wire])
    config.modified = timezone.now()
    config.save()
    # On: its pull request is watched from the next sweep; off: the watch stops.
    PullRequestWatch.objects.update_or_create(config=config, defaults={
        "state": "watching" if enabled else "off", "due": timezone.now()})
    return config


@transaction.atomic
def do_start_repair_turn(principal, chat, text, repository, pull_number, failed_checks=(), review_threads=(),
                         head_sha="", conflicts_with=""):
    """Agent Merge begins a repair turn and records exactly what it may touch."""
    turn, pending = session_actions.do_send_message(principal, chat, text, origin_kind="automation")
    if turn is None:
        raise Refused("The chat is busy; Agent Merge repairs only in a free chat.", "conflict")
    AgentMergeRepair.objects.create(turn=turn, repository=repository, pull_number=pull_number, head_sha=head_sha,
                                    failed_checks=list(failed_checks), review_threads=list(review_threads),
                                    conflicts_with=conflicts_with)
    return turn


def do_record_ci_evidence(repair, job_id, check_name, log):
    """Keep one job's log for the repair turn, so later reads cite the same evidence id."""
    return CIEvidence.objects.create(id=f"ev-{uuid.uuid4().hex[:12]}", repair=repair, job_id=job_id,
                                     check_name=check_name, log=log)


def do_defer_rerun(repair, run_id, failed_jobs_only):
    """A rerun asked while the run's attempt still goes; the sweep performs it later."""
    deferred, _ = DeferredRerun.objects.get_or_create(repair=repair, run_id=run_id,
                                                      defaults={"failed_jobs_only": failed_jobs_only})
    return deferred


def do_claim_deferred_rerun(deferred):
    """Mark a deferred rerun done; answers whether this caller claimed it (and so reruns it)."""
    return DeferredRerun.objects.filter(pk=deferred.pk, done=False).update(done=True) == 1


def do_claim_watch(watch, now, next_due):
    """Whether this caller polls `watch` now: it moves `due` on only if no other sweep did."""
    return PullRequestWatch.objects.filter(pk=watch.pk, due=watch.due, state__in=PullRequestWatch.POLLED).update(
        due=next_due) == 1


def do_note_watch(watch, **fields):
    """Record what a poll found (the pull request, a problem, the end of a repair)."""
    PullRequestWatch.objects.filter(pk=watch.pk).update(**fields)


@transaction.atomic
def do_start_watch_repair(watch, principal, chat, text, pull_number, head_sha, failed_checks, review_threads,
                          conflicts_with):
    turn = do_start_repair_turn(principal, chat, text, watch.repository, pull_number, failed_checks=failed_checks,
                                review_threads=review_threads, head_sha=head_sha, conflicts_with=conflicts_with)
    PullRequestWatch.objects.filter(pk=watch.pk).update(state="repairing", repair=turn.agent_merge_repair,
                                                        repaired=True, last_problem="")
    return turn


@transaction.atomic
def do_stop_watch_at_pending_review(repair):
    """The watch that started `repair` stops: a reply of it waits in the person's pending review,
    which only they can submit, so another look would only ask the same again."""
    PullRequestWatch.objects.filter(repair=repair, state__in=PullRequestWatch.POLLED).update(
        state="off", last_problem=PENDING_REVIEW)
