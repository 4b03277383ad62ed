"""The rows behind the host's own tools: comments on a session's annotations channel, a chat's
durable wakeup, questions a tool asks the person, and Agent Merge's configuration and repairs."""
from django.conf import settings
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


class AgentMergeConfig(models.Model):
    """Agent Merge for one folder of a session: whether it watches the pull request, what it
    repairs, and when it merges."""

    MERGE_WHEN = [("always", "always"), ("ifUnchanged", "if unchanged"), ("never", "never")]

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="agent_merge_configs")
    folder = models.CharField(max_length=2048, blank=True)
    enabled = models.BooleanField(default=False)
    address_reviews = models.BooleanField(default=True)
    fix_ci = models.BooleanField(default=True)
    resolve_conflicts = models.BooleanField(default=True)
    merge_pull_request = models.CharField(max_length=12, choices=MERGE_WHEN, default="never")
    modified = models.DateTimeField(default=timezone.now)

    tenant_path = "session__tenant"
    objects = TenantScopedManager()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["session", "folder"], name="agent_merge_one_per_folder")]

    def to_wire(self):
        merges = {"always": "merges as soon as the pull request is ready",
                  "ifUnchanged": "merges when ready, unless Agent Merge itself changed the pull request",
                  "never": "never merges; it only keeps the pull request green"}[self.merge_pull_request]
        return {"folder": self.folder, "enabled": self.enabled, "addressReviews": self.address_reviews,
                "fixCI": self.fix_ci, "resolveConflicts": self.resolve_conflicts,
                "mergePullRequest": self.merge_pull_request, "merges": merges if self.enabled else "off"}


class AgentMergeRepair(models.Model):
    """A repair turn Agent Merge started, and exactly what it was asked to fix."""

    turn = models.OneToOneField(Turn, on_delete=models.CASCADE, related_name="agent_merge_repair")
    repository = models.CharField(max_length=200, help_text="owner/name")
    pull_number = models.PositiveIntegerField()
    head_sha = models.CharField(max_length=64, blank=True)
    failed_checks = models.JSONField(default=list, help_text="[{name, runId, jobIds: [...]}]")
    review_threads = models.JSONField(default=list, help_text="Unresolved thread ids it may answer.")

    tenant_path = "turn__chat__session__tenant"
    objects = TenantScopedManager()

    def authorized_runs(self):
        return {str(c.get("runId")) for c in self.failed_checks}

    def authorized_jobs(self):
        return {str(j) for c in self.failed_checks for j in c.get("jobIds", ())}


class CIEvidence(models.Model):
    """A failed job's log fetched once for a repair turn; the model pages it by its id."""

    id = models.CharField(max_length=32, primary_key=True)
    repair = models.ForeignKey(AgentMergeRepair, on_delete=models.CASCADE, related_name="evidence")
    job_id = models.CharField(max_length=32)
    check_name = models.CharField(max_length=200, blank=True)
    log = models.TextField()

    tenant_path = "repair__turn__chat__session__tenant"
    objects = TenantScopedManager()


class DeferredRerun(models.Model):
    """A rerun asked while the run's current attempt was still going; done once it finishes."""

    repair = models.ForeignKey(AgentMergeRepair, on_delete=models.CASCADE, related_name="deferred_reruns")
    run_id = models.CharField(max_length=32)
    failed_jobs_only = models.BooleanField(default=True)
    done = models.BooleanField(default=False)
    created = models.DateTimeField(default=timezone.now)

    tenant_path = "repair__turn__chat__session__tenant"
    objects = TenantScopedManager()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["repair", "run_id"], name="deferred_rerun_once")]
