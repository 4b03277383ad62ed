"""Tool calls, whoever runs them, and the clients that announced tools in a session."""
import json
import uuid
from typing import Any

from django.conf import settings
from django.db import models
from django.utils import timezone

from grants.models import Tenant, TenantScopedManager

from .chats import Turn
from .sessions import Session


class ToolCall(models.Model):
    # A failed call is `completed` with `success: false` in its result, as on the wire.
    STATUSES = [("streaming", "streaming"), ("running", "running"), ("completed", "completed"),
                ("cancelled", "cancelled")]
    TERMINAL = ("completed", "cancelled")

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # A sessionless call (POST /api/v1/tools/<name>) has no turn: its tenant and caller say whose it is.
    turn = models.ForeignKey(Turn, null=True, blank=True, on_delete=models.CASCADE, related_name="tool_calls")
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="tool_calls")
    caller = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                               related_name="+", help_text="Who called without a session; a turn's call names "
                                                           "its turn's sender instead.")
    SOURCES = [("host", "host"), ("plugin", "plugin"), ("client", "client"), ("mcp", "MCP")]

    tool_name = models.CharField(max_length=128)
    display_name = models.CharField(max_length=200, blank=True)
    source = models.CharField(max_length=8, choices=SOURCES, blank=True, help_text="Who provides the tool; blank when refused.")
    input = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=16, choices=STATUSES, default="streaming")
    CONFIRMATIONS = [("not-needed", "not needed"), ("asked", "asked"), ("user-action", "user action"),
                     ("denied", "denied")]
    # While `asked`, the call waits in the session's inputNeeded (a toolConfirmation) for the person.
    confirmation = models.CharField(max_length=11, choices=CONFIRMATIONS, default="not-needed")
    confirmation_title = models.TextField(blank=True, help_text="The question the tool asks the person.")
    contributor_client_id = models.CharField(max_length=128, blank=True)
    waker = models.CharField(max_length=200, blank=True,
                             help_text="The channel of the process waiting for the result: its completion wakes it there.")
    result = models.JSONField(null=True, blank=True)
    timeout_ms = models.PositiveIntegerField(default=0, help_text="The client's time to answer; 0 is no limit.")
    deadline = models.DateTimeField(null=True, blank=True)
    created = models.DateTimeField(default=timezone.now)
    completed = models.DateTimeField(null=True, blank=True)

    tenant_path = "tenant"
    objects = TenantScopedManager()

    class Meta:
        indexes = [
            # The timeout sweep reads only open calls with a deadline.
            models.Index(
                fields=["deadline"], name="toolcall_open_deadline",
                condition=models.Q(deadline__isnull=False, completed__isnull=True),
            )
        ]

    @property
    def is_terminal(self) -> bool:
        return self.status in self.TERMINAL

    @property
    def contributor(self) -> dict[str, str] | None:
        return {"kind": "client", "clientId": self.contributor_client_id} if self.contributor_client_id else None

    def input_text(self) -> str:
        """The input as the wire shows it. Keys sorted: PostgreSQL's jsonb reorders them, and a
        snapshot read back must say what the action said."""
        return json.dumps(self.input, sort_keys=True)

    def invocation_message(self) -> str:
        return f"Running {self.display_name or self.tool_name}"

    def state(self) -> dict[str, Any]:
        """The AHP ToolCallState of this call."""
        state: dict[str, Any] = {"toolCallId": str(self.id), "toolName": self.tool_name, "displayName": self.display_name or self.tool_name}
        if self.contributor:
            state["contributor"] = self.contributor
        if self.status == "streaming":
            return {**state, "status": "streaming"}
        state.update(invocationMessage=self.invocation_message(), toolInput=self.input_text())
        if self.status == "cancelled":
            return {**state, "status": "cancelled", "reason": (self.result or {}).get("reason", "skipped")}
        if self.status == "running" and self.confirmation == "asked":
            return {**state, "status": "pending-confirmation", "confirmationTitle": self.confirmation_title}
        if self.confirmation in ("not-needed", "user-action"):
            state["confirmed"] = self.confirmation
        if self.status == "running":  # with what its client has shown so far (chat/toolCallContentChanged)
            return {**state, "status": "running", **({"content": self.result["content"]} if self.result else {})}
        return {**state, "status": "completed", **(self.result or {})}


class ActiveClient(models.Model):
    """A client providing tools to a session (AHP SessionActiveClient). While all its
    connections are gone it keeps its place until `release_at`."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="active_clients")
    client_id = models.CharField(max_length=128)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="+",
        help_text="The person whose connection first announced this client id in the session; empty for the "
                  "tenant's root. Nobody else may act as this client here.",
    )
    display_name = models.CharField(max_length=200, blank=True)
    tools = models.JSONField(default=list, blank=True)
    customizations = models.JSONField(null=True, blank=True)
    release_at = models.DateTimeField(null=True, blank=True)
    modified = models.DateTimeField(default=timezone.now)

    tenant_path = "session__tenant"
    objects = TenantScopedManager()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["session", "client_id"], name="active_client_unique")]
        indexes = [models.Index(fields=["release_at"], name="active_client_release",
                                condition=models.Q(release_at__isnull=False))]

    def to_wire(self) -> dict[str, Any]:
        wire = {"clientId": self.client_id, "tools": self.tools}
        if self.display_name:
            wire["displayName"] = self.display_name
        if self.customizations is not None:
            wire["customizations"] = self.customizations
        return wire
