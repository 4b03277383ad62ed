"""The rows of comments on a session's annotations channel, and of questions a tool asks the person."""
from django.db import models
from django.utils import timezone

from grants.models import TenantScopedManager
from sessions_app.models import Chat, Session, Turn

FEEDBACK_KEY = "vscode.agentFeedback"


class Annotation(models.Model):
    """One AHP Annotation on `ahp-session:/<uuid>/annotations`. Its id is the producer's (a client
    or a tool), unique within the session's channel."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="annotations")
    annotation_id = models.CharField(max_length=128)
    turn_id = models.CharField(max_length=64, blank=True)
    resource = models.CharField(max_length=2048)
    range = models.JSONField(null=True, blank=True, help_text="AHP TextRange, zero-based.")
    resolved = models.BooleanField(default=False)
    entries = models.JSONField(default=list)
    meta = models.JSONField(null=True, blank=True, help_text="The annotation's _meta.")
    created = models.DateTimeField(default=timezone.now)

    tenant_path = "session__tenant"
    objects = TenantScopedManager()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["session", "annotation_id"], name="annotation_unique_id")]
        indexes = [models.Index(fields=["session", "created"], name="annotation_session_created")]

    def to_wire(self):
        wire = {"id": self.annotation_id, "turnId": self.turn_id, "resource": self.resource,
                "resolved": self.resolved, "entries": self.entries}
        if self.range is not None:
            wire["range"] = self.range
        if self.meta is not None:
            wire["_meta"] = self.meta
        return wire

    @property
    def feedback(self):
        """The agent-feedback semantics, or None: an annotation without them is someone else's."""
        slot = (self.meta or {}).get(FEEDBACK_KEY)
        if not isinstance(slot, dict):
            return None
        if slot.get("kind") not in ("user", "codeReview", "prReview"):
            return None
        if slot.get("state") not in ("created", "accepted", "submitted", "resolved"):
            return None
        if slot.get("sessionResource") != self.session.uri:
            return None
        return slot


class Question(models.Model):
    """A tool asking the person before it runs (a toolConfirmation in the session's inputNeeded)."""

    tool_call_id = models.CharField(max_length=64, unique=True)
    chat = models.ForeignKey(Chat, on_delete=models.CASCADE, related_name="+")
    turn = models.ForeignKey(Turn, on_delete=models.CASCADE, related_name="+")
    title = models.TextField()
    approved = models.BooleanField(null=True, blank=True)
    created = models.DateTimeField(default=timezone.now)

    tenant_path = "chat__session__tenant"
    objects = TenantScopedManager()
