"""Sessions: the row a conversation hangs on, its place among its siblings, and what its tools
spent of its tree's budget; the URIs and timestamps the wire shows them with."""
import uuid
from datetime import datetime
from datetime import timezone as dt_timezone
from typing import Any

from django.conf import settings
from django.db import models
from django.utils import timezone

from grants.algebra import holds, known_grants
from grants.models import Principal, Tenant, TenantScopedManager, TenantScopedQuerySet

SESSION_URI_PREFIX = "ahp-session:/"
CHAT_URI_PREFIX = "ahp-chat:/"


def iso(moment: datetime) -> str:
    """AHP timestamps: ISO 8601 in UTC with milliseconds and a Z."""
    return moment.astimezone(dt_timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


# A session's published tools (the host's definitions with their schemas, tens of KB) are read
# by its snapshot alone; the work of its turns, which reads the session at every step, leaves
# them unread (decoding them was most of a host call's completion).
PUBLISHED_TOOLS = "server_tools"


class SessionQuerySet(TenantScopedQuerySet):
    def visible_to(self, principal: Principal) -> "models.QuerySet[Session]":
        """The sessions of the principal's tenant it may read: all of them with a role grant
        covering session:read, otherwise those it holds a per-object grant on."""
        mine = self.for_tenant(principal.tenant)
        if holds(principal.grants, "session:read"):
            return mine
        if principal.person is None:
            return mine.none()
        from guardian.shortcuts import get_objects_for_user

        codenames = [f"sessions_app.{g}" for g in known_grants() if holds([g], "session:read")]
        return get_objects_for_user(
            principal.person, codenames, klass=mine, any_perm=True, accept_global_perms=False
        )

    def listed(self) -> "SessionQuerySet":
        """Without the columns no listing reads and that grow with the session: its published
        tools (the host's definitions with their schemas), config and _meta. Decoding them was
        a tenth of a serving process's time under load, for rows a listing shows a line of."""
        return self.defer(PUBLISHED_TOOLS, "config", "meta")


SessionManager = models.Manager.from_queryset(SessionQuerySet)


class Session(models.Model):
    # AHP SessionStatus bits. The activity bits live in `status`; read and archived are columns.
    IDLE = 1
    ERROR = 1 << 1
    IN_PROGRESS = 1 << 3
    INPUT_NEEDED = (1 << 3) | (1 << 4)
    IS_READ = 1 << 5
    IS_ARCHIVED = 1 << 6
    ACTIVITY = (1 << 5) - 1  # the activity bits, below the read and archived flags

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="sessions")
    provider = models.CharField(max_length=64, default="echo")
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="owned_sessions"
    )
    title = models.CharField(max_length=200, blank=True)
    status = models.PositiveSmallIntegerField(default=IDLE)
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="children",
        help_text="The session whose create tool made this one.",
    )
    depth = models.PositiveSmallIntegerField(default=0, help_text="Spawn depth below the root of its tree.")
    root = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="tree",
        help_text="The session nothing started, at the top of this one's tree.",
    )
    working_directories = models.JSONField(default=list, blank=True)
    archived = models.BooleanField(default=False)
    read = models.BooleanField(default=True)
    config = models.JSONField(default=dict, blank=True)
    meta = models.JSONField(default=dict, blank=True, help_text="The session's AHP _meta.")
    server_tools = models.JSONField(
        default=list, blank=True, help_text="The serverTools last published to this session's subscribers."
    )
    created = models.DateTimeField(default=timezone.now)
    modified = models.DateTimeField(default=timezone.now, db_index=True)

    tenant_path = "tenant"
    objects = SessionManager()

    class Meta:
        permissions = [(g, f"May {g}") for g in known_grants() if g.split(":")[0] in ("session", "chat")]
        indexes = [models.Index(fields=["tenant", "-modified"], name="session_tenant_modified")]

    def __str__(self) -> str:
        return self.title or str(self.id)

    def save(self, *args: Any, **kwargs: Any) -> None:
        if self.root_id is None and self.parent_id is None:
            self.root_id = self.id
        super().save(*args, **kwargs)

    @property
    def uri(self) -> str:
        return f"{SESSION_URI_PREFIX}{self.id}"

    @property
    def wire_status(self) -> int:
        return self.status | (self.IS_READ if self.read else 0) | (self.IS_ARCHIVED if self.archived else 0)

    def summary(self) -> dict[str, Any]:
        """The AHP SessionSummary of this session."""
        return {
            "resource": self.uri,
            "provider": self.provider,
            "title": self.title,
            "status": self.wire_status,
            "createdAt": iso(self.created),
            "modifiedAt": iso(self.modified),
            "workingDirectories": list(self.working_directories),
        }


class SessionPlacement(models.Model):
    """Where a nested session sits among its siblings (move_session reorders them)."""

    session = models.OneToOneField(Session, on_delete=models.CASCADE, primary_key=True, related_name="placement")
    position = models.FloatField(default=0)

    tenant_path = "session__tenant"
    objects = TenantScopedManager()


class OrchestrationCharge(models.Model):
    """One thing a session tool made happen (a session, a chat, a message), charged to the tree
    (and session) that asked for it. Rows, so the sliding-hour counts survive a restart; plain
    ids, so a charge outlives the sessions it names and deleting one frees nothing."""

    KINDS = [("session", "session"), ("chat", "chat"), ("message", "message")]

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    tree = models.UUIDField(help_text="The root session of the caller's tree.")
    session = models.UUIDField(help_text="The calling session.")
    kind = models.CharField(max_length=8, choices=KINDS)
    created = models.DateTimeField(default=timezone.now)

    tenant_path = "tenant"
    objects = TenantScopedManager()

    class Meta:
        indexes = [models.Index(fields=["tree", "kind", "created"], name="charge_tree_window"),
                   models.Index(fields=["session", "kind", "created"], name="charge_session_window")]
