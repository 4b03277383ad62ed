"""A chat's durable wakeup."""
from django.conf import settings
from django.db import models
from django.utils import timezone

from grants.models import TenantScopedManager
from sessions_app.models import Chat


class Wakeup(models.Model):
    """A chat's one pending wakeup. The row is the schedule: a task is queued for `due`, and the
    sweep fires whatever is due and was missed. Firing deletes the row by a conditional DELETE in
    the transaction that begins its turn, so one worker fires a due time; a refused wakeup is
    kept as `refused` and fires again at the next start."""

    STATES = [("pending", "pending"), ("refused", "refused")]

    chat = models.OneToOneField(Chat, on_delete=models.CASCADE, related_name="wakeup")
    person = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                               help_text="The person of the turn that scheduled it; its turn is theirs.")
    prompt = models.TextField()
    due = models.DateTimeField()
    state = models.CharField(max_length=8, choices=STATES, default="pending")
    refusal = models.TextField(blank=True, help_text="Why its last firing was refused.")
    created = models.DateTimeField(default=timezone.now)

    tenant_path = "chat__session__tenant"
    objects = TenantScopedManager()

    class Meta:
        indexes = [models.Index(fields=["due"], name="wakeup_pending_due", condition=models.Q(state="pending"))]
