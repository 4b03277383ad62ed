from django.db import models
from django.utils import timezone


class WorkerHeartbeat(models.Model):
    """The last time a Celery worker beat, and on which node; each node's /healthz reports its own."""

    hostname = models.CharField(max_length=200, unique=True)
    node = models.CharField(max_length=200, default="", db_index=True)
    seen = models.DateTimeField(default=timezone.now)

    def __str__(self):
        return f"{self.hostname} at {self.seen:%Y-%m-%d %H:%M:%S}"
