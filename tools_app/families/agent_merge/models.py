"""Agent Merge's configuration per folder, its repair turns and what they may touch."""
from django.db import models
from django.utils import timezone

from grants.models import TenantScopedManager
from sessions_app.models import Session, Turn


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
    conflicts_with = models.CharField(max_length=255, blank=True,
                                      help_text="The base branch whose merge conflicts it was asked to resolve.")

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


class PullRequestWatch(models.Model):
    """Agent Merge watching one folder's pull request: polled when `due` by the sweep, which
    claims the row by moving `due` on (a conditional UPDATE), so one worker polls it at a time.
    While its repair turn runs it asks nothing; once that turn ends it watches the new head."""

    STATES = [("watching", "watching"), ("repairing", "repairing"), ("merged", "merged"), ("closed", "closed"),
              ("off", "off")]
    POLLED = ("watching", "repairing")

    config = models.OneToOneField(AgentMergeConfig, on_delete=models.CASCADE, related_name="watch")
    state = models.CharField(max_length=9, choices=STATES, default="watching")
    due = models.DateTimeField(default=timezone.now)
    repository = models.CharField(max_length=200, blank=True, help_text="owner/name, read from the folder's origin.")
    pull_number = models.PositiveIntegerField(null=True, blank=True)
    repair = models.ForeignKey(AgentMergeRepair, null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
                               help_text="The repair turn it started last.")
    repaired = models.BooleanField(default=False, help_text="Agent Merge changed the pull request (ifUnchanged).")
    last_problem = models.TextField(blank=True, help_text="Why the last poll could not look, in a sentence.")

    tenant_path = "config__session__tenant"
    objects = TenantScopedManager()

    class Meta:
        indexes = [models.Index(fields=["due"], name="pr_watch_due", condition=models.Q(state__in=("watching",
                                                                                                  "repairing")))]
