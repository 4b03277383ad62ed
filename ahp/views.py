from django.db import connection
from django.http import JsonResponse

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
