import uuid

from django.conf import settings
from django.db import models
from django.utils import timezone

from grants.models import TenantScopedManager
from sessions_app.channels import TERMINAL_URI_PREFIX
from sessions_app.models import Session

MAX_KEPT_OUTPUT = 64 * 1024  # a fresh snapshot's content: the terminal's last output, bounded


class Terminal(models.Model):
    """A shell in a session's sandbox, on a PTY held by one host process (`process`)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="terminals")
    creator = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                related_name="+")
    title = models.CharField(max_length=200, blank=True)
    cwd = models.CharField(max_length=1000)
    cols = models.PositiveSmallIntegerField(default=80)
    rows = models.PositiveSmallIntegerField(default=24)
    claim = models.JSONField(default=dict, help_text="The AHP TerminalClaim: who holds it.")
    output = models.TextField(blank=True, help_text="The last output, at most MAX_KEPT_OUTPUT characters.")
    exit_code = models.IntegerField(null=True, blank=True)
    process = models.CharField(max_length=64, help_text="The host process holding its PTY.")
    created = models.DateTimeField(default=timezone.now)

    tenant_path = "session__tenant"
    objects = TenantScopedManager()

    @property
    def uri(self):
        return f"{TERMINAL_URI_PREFIX}{self.id}"

    def state(self):
        """The AHP TerminalState."""
        state = {"title": self.title, "cwd": self.cwd, "cols": self.cols, "rows": self.rows,
                 "content": [{"type": "unclassified", "value": self.output}] if self.output else [],
                 "claim": self.claim}
        if self.exit_code is not None:
            state["exitCode"] = self.exit_code
        return state

