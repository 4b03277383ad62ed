"""Durable scheduled work. Each task re-reads its row and acts only if the row is still due, so
a task that fires twice, late, or after the sweep already acted changes nothing."""
from datetime import timedelta

from celery import shared_task
from django.utils import timezone

from .actions.clients import do_close_connections, do_release_client
from .actions.presence import forget_dead_processes, live_processes
from .actions.tool_calls import do_expire_tool_call
from .actions.turns import abandoned_turns, do_end_abandoned_turn
from .events.log import prune_action_log
from .models import ActiveClient, ClientConnection, ToolCall

# A connection or process row not refreshed for this long belongs to a dead process.
STALE_CONNECTION_SECONDS = 20


@shared_task
def expire_tool_call(call_id):
    do_expire_tool_call(call_id)


@shared_task
def release_client(active_client_pk):
    do_release_client(active_client_pk, only_if_due=True)


@shared_task
def sweep_due_work(stale_after_seconds=STALE_CONNECTION_SECONDS):
    """Catch whatever was due and missed: after downtime, or when a process died."""
    now = timezone.now()
    for call_id in ToolCall.objects.filter(completed__isnull=True, deadline__lte=now).values_list("id", flat=True):
        do_expire_tool_call(call_id)
    stale, timeouts = [], {}  # timeouts: tenant id -> its clients' disconnect timeout
    for connection in ClientConnection.objects.filter(
            seen__lt=now - timedelta(seconds=stale_after_seconds)).select_related("tenant__host_config"):
        stale.append(connection.id)
        timeouts[connection.tenant_id] = getattr(getattr(connection.tenant, "host_config", None),
                                                 "client_tool_call_disconnect_timeout_ms", 30000)
    for pk, due in do_close_connections(stale, timeouts.get):
        release_client.apply_async((pk,), eta=due)
    for pk in ActiveClient.objects.filter(release_at__lte=now).values_list("pk", flat=True):
        do_release_client(pk, only_if_due=True)
    end_abandoned_turns(now - timedelta(seconds=stale_after_seconds))
    prune_action_log()


def end_abandoned_turns(cutoff):
    """Turns whose runner stopped renewing its lease before `cutoff` end with chat/error."""
    live = list(live_processes(cutoff))
    ended = sum(do_end_abandoned_turn(turn_id, live) for turn_id in list(abandoned_turns(live, cutoff)))
    forget_dead_processes(cutoff - timedelta(seconds=STALE_CONNECTION_SECONDS))
    return ended
