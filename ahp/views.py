from django.db import connection
from django.http import JsonResponse
from django.shortcuts import render

from .models import WorkerHeartbeat


def healthz(request):
    """Is the database reachable, and when did a Celery worker last beat?"""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        database = "ok"
    except Exception as exc:  # the answer itself is the report
        database = f"error: {exc.__class__.__name__}"
    beat = WorkerHeartbeat.objects.order_by("-seen").first() if database == "ok" else None
    return JsonResponse(
        {"database": database, "workerSeen": beat.seen.isoformat() if beat else None},
        status=200 if database == "ok" else 503,
    )


def landing(request):
    """`/`: what this host is and where its doors are, for anyone who opens it in a browser."""
    base = request.build_absolute_uri("/").rstrip("/")
    sockets = "wss" if request.is_secure() else "ws"
    return render(request, "landing.html", {
        "websocket_url": f"{sockets}://{request.get_host()}/ahp", "mcp_url": f"{base}/ahp-mcp/<session uuid>"})
