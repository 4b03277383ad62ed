from django.db import models
from django.utils import timezone


class WorkerHeartbeat(models.Model):
    """The last time a Celery worker ran its periodic heartbeat; /healthz reports it."""

    hostname = models.CharField(max_length=200, unique=True)
    seen = models.DateTimeField(default=timezone.now)

    def __str__(self):
        return f"{self.hostname} at {self.seen:%Y-%m-%d %H:%M:%S}"
