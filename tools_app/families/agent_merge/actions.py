"""Every change Agent Merge makes: one `do_*` function each."""
from django.db import transaction
from django.utils import timezone

from kernel.refusals import Refused
from sessions_app import actions as session_actions
from sessions_app.actions import require

from .models import AgentMergeConfig, AgentMergeRepair

AGENT_MERGE_OPTIONS = {"addressReviews": "address_reviews", "fixCI": "fix_ci", "resolveConflicts": "resolve_conflicts",
                       "mergePullRequest": "merge_pull_request"}


@transaction.atomic
def do_set_agent_merge(principal, session, folder, enabled, options):
    require(principal, "session:configure", session)
    config, _ = AgentMergeConfig.objects.select_for_update().get_or_create(session=session, folder=folder)
    config.enabled = enabled
    for wire, column in AGENT_MERGE_OPTIONS.items():
        if wire in options:
            setattr(config, column, options[wire])
    config.modified = timezone.now()
    config.save()
    return config


@transaction.atomic
def do_start_repair_turn(principal, chat, text, repository, pull_number, failed_checks=(), review_threads=(),
                         head_sha=""):
    """Agent Merge begins a repair turn and records exactly what it may touch."""
    turn, pending = session_actions.do_send_message(principal, chat, text, origin_kind="automation")
    if turn is None:
        raise Refused("The chat is busy; Agent Merge repairs only in a free chat.", "conflict")
    AgentMergeRepair.objects.create(turn=turn, repository=repository, pull_number=pull_number, head_sha=head_sha,
                                    failed_checks=list(failed_checks), review_threads=list(review_threads))
    return turn
