"""What the operator's dashboard shows for one tenant, computed from rows."""
from datetime import timedelta

from django.db.models import Count, Max
from django.db.models.functions import TruncHour
from django.utils import timezone

from sessions_app.models import Session, ToolCall

from . import budget
from .audit import REFUSAL_REASONS
from .charts import bars, stacked_columns
from .models import AuditEntry
from .running import running_turns, waiting_for_a_person

SOURCES = (("host", "host", "#417690"), ("plugin", "plugin", "#79aec8"), ("client", "client", "#e6a23c"),
           ("mcp", "MCP", "#8e44ad"), ("", "refused before running", "#c0392b"))
HOURS = 24
REFRESH_SECONDS = 15


def calls_per_hour(tenant, now):
    """[(hour label, {source: count})] for the last HOURS hours, oldest first."""
    start = now.replace(minute=0, second=0, microsecond=0) - timedelta(hours=HOURS - 1)
    rows = (ToolCall.objects.for_tenant(tenant).filter(created__gte=start)
            .annotate(hour=TruncHour("created")).values("hour", "source").annotate(n=Count("id")))
    per_hour = {}
    for row in rows:
        per_hour.setdefault(row["hour"], {})[row["source"]] = row["n"]
    hours = [start + timedelta(hours=i) for i in range(HOURS)]
    return [(f"{h:%H}:00", per_hour.get(h, {})) for h in hours]


def refusals_by_reason(tenant, since):
    rows = (AuditEntry.objects.for_tenant(tenant).filter(created__gte=since).with_outcome()
            .filter(outcome="refused").values("refusal_reason").annotate(n=Count("id")))
    counts = {row["refusal_reason"]: row["n"] for row in rows}
    return [(label, counts.get(key, 0), None) for key, label, _ in REFUSAL_REASONS]


def busiest_trees(tenant, now, limit=8):
    """The trees with the most tool calls in the last hour, with their orchestration budget
    used (None per tree when no charges are recorded)."""
    since = now - budget.WINDOW
    rows = (ToolCall.objects.for_tenant(tenant).filter(created__gte=since)
            .values("turn__chat__session__root").annotate(n=Count("id")).order_by("-n")[:limit])
    roots = {row["turn__chat__session__root"]: row["n"] for row in rows if row["turn__chat__session__root"]}
    used = budget.used_by_tree(tenant, roots, now)
    if used:  # trees that spent budget without many tool calls are busy too
        for tree in used:
            roots.setdefault(tree, 0)
    sessions = {s.pk: s for s in Session.objects.for_tenant(tenant).filter(pk__in=roots)}
    depths = dict(Session.objects.for_tenant(tenant).filter(root_id__in=roots).values("root_id")
                  .annotate(d=Max("depth")).values_list("root_id", "d"))
    trees = []
    for root, calls in sorted(roots.items(), key=lambda item: -item[1]):
        spent = None if used is None else used.get(root, {})
        if not calls and not any((spent or {}).values()):
            continue  # a tree with no work in the hour is not busy
        trees.append({"root": sessions.get(root), "root_id": root, "tool_calls": calls,
                      "depth": depths.get(root, 0), "spent": spent,
                      "budget": None if spent is None else budget.describe(spent)})
    return trees[:limit]


def client_calls(tenant, now):
    since = now - timedelta(hours=HOURS)
    calls = AuditEntry.objects.for_tenant(tenant).exclude(contributor_client_id="")
    waiting = (calls.filter(completed__isnull=True).select_related("turn__chat__session")
               .order_by("created"))
    timed_out = calls.filter(created__gte=since).with_outcome().filter(outcome="timed_out").count()
    answered = calls.filter(created__gte=since, completed__isnull=False).count()
    return {"waiting": list(waiting[:20]), "waiting_count": waiting.count(), "timed_out": timed_out,
            "answered": answered}


def dashboard(tenant, now=None):
    now = now or timezone.now()
    since = now - timedelta(hours=HOURS)
    hours = calls_per_hour(tenant, now)
    refusals = refusals_by_reason(tenant, since)
    trees = busiest_trees(tenant, now)
    tree_rows = []
    for tree in trees:
        name = str(tree["root"] or tree["root_id"])
        if not any((tree["spent"] or {}).values()):
            tree_rows.append((f"{name} (tool calls)", tree["tool_calls"], None))
        else:  # the kind closest to its limit is the one that will refuse first
            kind = max(budget.LIMITS, key=lambda k: tree["spent"].get(k, 0) / budget.LIMITS[k])
            tree_rows.append((f"{name} ({kind}s)", tree["spent"].get(kind, 0), budget.LIMITS[kind]))
    return {
        "tenant": tenant,
        "now": now,
        "hours": HOURS,
        "hours_counts": hours,
        "calls_chart": stacked_columns(hours, SOURCES, "Tool calls per hour by source"),
        "calls_total": sum(sum(c.values()) for _, c in hours),
        "refusals": refusals,
        "refusals_chart": bars(refusals, "Refusals by reason"),
        "refusals_total": sum(n for _, n, _ in refusals),
        "trees": trees,
        "trees_chart": bars(tree_rows, "Busiest session trees"),
        "budget_recorded": budget.budget_recorded(),
        "limits": budget.LIMITS,
        "max_depth": budget.MAX_SPAWN_DEPTH,
        "clients": client_calls(tenant, now),
        "running_turns": list(running_turns(tenant)),
        "waiting_for_a_person": list(waiting_for_a_person(tenant)),
        "refresh_seconds": REFRESH_SECONDS,
    }
