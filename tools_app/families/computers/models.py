import uuid

from django.db import models
from django.utils import timezone

from grants.models import TenantScopedManager
from sessions_app.models import Session


class Computer(models.Model):
    """A disposable computer a session asked for: a sandbox of its own with a writable root,
    until released or its session goes."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="computers")
    created = models.DateTimeField(default=timezone.now)

    tenant_path = "session__tenant"
    objects = TenantScopedManager()

    @property
    def sandbox_key(self):
        return sandbox_key(self.session_id, self.id)


def sandbox_key(session_id, computer_id):
    return f"computer-{session_id}-{computer_id}"
