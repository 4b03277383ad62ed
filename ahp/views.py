import os

from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.shortcuts import render

from sessions_app.events.log import this_node

from .deployment import FRONT_PROCESSES
from .models import WorkerHeartbeat


def serving_processes() -> dict[str, int]:
    """This node's serving processes running now: the children of the front that handed this one
    its connections (ahp/front.py), or this process alone when it listens itself."""
    configured = int(os.environ.get(FRONT_PROCESSES) or 0)
    if not configured:
        return {"running": 1, "of": 1}
    front = os.getppid()
    try:
        with open(f"/proc/{front}/task/{front}/children") as children:
            pids = children.read().split()
    except OSError:
        return {"running": 1, "of": configured}
    return {"running": sum(is_running(pid) for pid in pids), "of": configured}


def is_running(pid: str) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rpartition(")")[2].split()[0] != "Z"  # exited, not yet reaped
    except OSError:
        return False


def healthz(request: HttpRequest) -> JsonResponse:
    """This node's health: is the database reachable, how many of its serving processes run, and
    when did its own Celery worker last beat (not any node's)?"""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        database = "ok"
    except Exception as exc:  # the answer itself is the report
        database = f"error: {exc.__class__.__name__}"
    beat = (WorkerHeartbeat.objects.filter(node=this_node()).order_by("-seen").first()
            if database == "ok" else None)
    return JsonResponse(
        {"node": this_node(), "database": database, "servingProcesses": serving_processes(),
         "workerSeen": beat.seen.isoformat() if beat else None},
        status=200 if database == "ok" else 503,
    )


def landing(request):
    """`/`: what this host is and where its doors are, for anyone who opens it in a browser."""
    base = request.build_absolute_uri("/").rstrip("/")
    sockets = "wss" if request.is_secure() else "ws"
    return render(request, "landing.html", {
        "websocket_url": f"{sockets}://{request.get_host()}/ahp", "mcp_url": f"{base}/ahp-mcp/<session uuid>"})
