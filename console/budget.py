"""Orchestration budget used per session tree in the sliding hour, read from the charge rows
the session tools write (sessions_app.OrchestrationCharge). Where that model is not installed
there is nothing to read, and callers say so instead of guessing."""
from django.apps import apps
from django.db.models import Count
from django.utils import timezone

# The limits the session tools enforce, per tree (or session) and sliding hour.
from sessions_app.actions import MAX_SPAWN_DEPTH  # noqa: F401 (the dashboard shows it)
from sessions_app.actions import ORCHESTRATION_LIMITS as LIMITS
from sessions_app.actions import ORCHESTRATION_WINDOW as WINDOW


def charge_model():
    try:
        return apps.get_model("sessions_app", "OrchestrationCharge")
    except LookupError:
        return None


def budget_recorded():
    return charge_model() is not None


def used_by_tree(tenant, trees=None, now=None):
    """{tree uuid: {kind: count in the last hour}}; None where no charges are recorded."""
    model = charge_model()
    if model is None:
        return None
    charges = model.objects.for_tenant(tenant).filter(created__gte=(now or timezone.now()) - WINDOW)
    if trees is not None:
        charges = charges.filter(tree__in=list(trees))
    used = {}
    for row in charges.values("tree", "kind").annotate(n=Count("id")):
        used.setdefault(row["tree"], {})[row["kind"]] = row["n"]
    return used


def describe(used):
    """`3/50 sessions, 0/50 chats, 12/100 messages` for one tree's counts."""
    return ", ".join(f"{(used or {}).get(kind, 0)}/{limit} {kind}s" for kind, limit in LIMITS.items())
