"""A session's chats and what happens in them: turns, the messages waiting for one, drafts, the
changes a turn's tools asked for, a chat's own agent and folder, and moves between sessions."""
import uuid
from typing import Any

from django.conf import settings
from django.db import models
from django.utils import timezone

from grants.models import Tenant, TenantScopedManager, TenantScopedQuerySet

from .sessions import CHAT_URI_PREFIX, PUBLISHED_TOOLS, Session


class TurnQuerySet(TenantScopedQuerySet):
    def with_chat(self) -> "TurnQuerySet":
        """Each turn with its chat and session, as a turn's work reads them: all but the
        session's published tools."""
        return self.select_related("chat__session").defer(f"chat__session__{PUBLISHED_TOOLS}")


class Chat(models.Model):
    ORIGIN_KINDS = [("user", "user"), ("fork", "fork"), ("sideChat", "side chat"), ("tool", "tool")]

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="chats")
    title = models.CharField(max_length=200, blank=True)
    is_default = models.BooleanField(default=False)
    archived = models.BooleanField(default=False)
    origin_kind = models.CharField(max_length=16, choices=ORIGIN_KINDS, default="user")
    origin_chat = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="spawned_chats"
    )
    origin_turn_id = models.CharField(max_length=64, blank=True)
    origin_tool_call_id = models.CharField(max_length=64, blank=True)
    creator = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="created_chats",
        help_text="Who made the chat (empty: the tenant's root token); their chat quota counts it.",
    )
    created = models.DateTimeField(default=timezone.now)
    modified = models.DateTimeField(default=timezone.now)

    tenant_path = "session__tenant"
    objects = TenantScopedManager()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["session"], condition=models.Q(is_default=True), name="one_default_chat_per_session"
            )
        ]

    def __str__(self) -> str:
        return self.title or str(self.id)

    @property
    def uri(self) -> str:
        return f"{CHAT_URI_PREFIX}{self.id}"

    def origin(self) -> dict[str, str]:
        """The AHP ChatOrigin of this chat."""
        if self.origin_kind == "user":
            return {"kind": "user"}
        origin = {"kind": self.origin_kind, "chat": f"{CHAT_URI_PREFIX}{self.origin_chat_id}"}
        if self.origin_kind == "tool":
            origin["toolCallId"] = self.origin_tool_call_id
        else:
            origin["turnId"] = self.origin_turn_id
        return origin


class Turn(models.Model):
    STATES = [("active", "active"), ("complete", "complete"), ("cancelled", "cancelled"), ("error", "error")]

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    chat = models.ForeignKey(Chat, on_delete=models.CASCADE, related_name="turns")
    sender = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    text = models.TextField(blank=True)
    origin_kind = models.CharField(max_length=24, default="user", help_text="AHP message origin kind.")
    client_id = models.CharField(max_length=128, blank=True, help_text="The client that started the turn.")
    model = models.CharField(max_length=200, blank=True, help_text="The model its message selected (its id).")
    response_parts = models.JSONField(
        default=list, blank=True, help_text="Markdown parts ({kind, id, content}) and tool call ids, in order."
    )
    state = models.CharField(max_length=16, choices=STATES, default="active")
    error = models.JSONField(null=True, blank=True, help_text="The AHP error ({errorType, message}) it ended in.")
    runner = models.CharField(max_length=64, blank=True,
                              help_text="The host process running its agent (a HostProcess name): its lease.")
    started = models.DateTimeField(default=timezone.now)
    ended = models.DateTimeField(null=True, blank=True)

    tenant_path = "chat__session__tenant"
    objects = models.Manager.from_queryset(TurnQuerySet)()

    class Meta:
        indexes = [models.Index(fields=["chat", "started"], name="turn_chat_started"),
                   models.Index(fields=["started"], condition=models.Q(state="active"), name="turn_active_started")]

    def message(self) -> dict[str, Any]:
        """The wire Message that started it."""
        message = {"text": self.text, "origin": {"kind": self.origin_kind}}
        if self.model:
            message["model"] = {"id": self.model}
        return message


class PendingMessage(models.Model):
    """A message waiting for its chat to be free (AHP queued message), delivered as the next turn."""

    DELIVERIES = [("steer", "steer"), ("queue", "queue")]
    STATUSES = [("pending", "pending"), ("delivered", "delivered"), ("cancelled", "cancelled")]

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    chat = models.ForeignKey(Chat, on_delete=models.CASCADE, related_name="pending_messages")
    sender = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    sender_chat = models.ForeignKey(
        Chat, null=True, blank=True, on_delete=models.SET_NULL, related_name="sent_messages",
        help_text="The chat whose tool sent it, if a tool did.",
    )
    text = models.TextField()
    origin_kind = models.CharField(max_length=24, default="user", help_text="AHP message origin kind.")
    delivery = models.CharField(max_length=5, choices=DELIVERIES, default="queue")
    status = models.CharField(max_length=9, choices=STATUSES, default="pending")
    revision = models.PositiveIntegerField(default=1)
    position = models.PositiveIntegerField(default=0, help_text="Its place in the chat's queue (reorderable).")
    created = models.DateTimeField(default=timezone.now)

    tenant_path = "chat__session__tenant"
    objects = TenantScopedManager()

    class Meta:
        indexes = [models.Index(fields=["chat", "status", "created"], name="pending_message_queue")]

    @property
    def wire_kind(self) -> str:
        return "steering" if self.delivery == "steer" else "queued"

    def to_wire(self) -> dict[str, Any]:
        return {"id": str(self.id), "message": {"text": self.text, "origin": {"kind": self.origin_kind}}}


class ChatDraft(models.Model):
    """The message a person is composing in a chat and has not sent (AHP ChatState.draft), with its
    model selection: create_session reads the model from here when the calling chat names one."""

    chat = models.OneToOneField(Chat, primary_key=True, on_delete=models.CASCADE, related_name="draft")
    message = models.JSONField(help_text="The draft Message as the client sent it (text, model, agent, attachments).")
    model = models.CharField(max_length=200, blank=True, help_text="Its model selection (the id).")
    author = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                               related_name="+")
    modified = models.DateTimeField(default=timezone.now)

    tenant_path = "chat__session__tenant"
    objects = TenantScopedManager()


class ChatBackend(models.Model):
    """A chat's own agent and folder, where they differ from its session's (a chat the create
    tool made on another backend, a chat moved into its own worktree)."""

    chat = models.OneToOneField(Chat, on_delete=models.CASCADE, primary_key=True, related_name="backend")
    provider = models.CharField(max_length=64, blank=True, help_text="Empty: the session's provider.")
    working_directory = models.CharField(max_length=1000, blank=True, help_text="Empty: the session's first.")
    config = models.JSONField(default=dict, blank=True, help_text="The chat's own agent settings (create_session).")

    tenant_path = "chat__session__tenant"
    objects = TenantScopedManager()


class TurnEffect(models.Model):
    """A change a tool asked for that happens only when its turn completes (set_workspace,
    isolate_session); dropped when the turn is cancelled or fails."""

    KINDS = [("set_workspace", "set workspace"), ("isolate_chat", "isolate chat")]

    turn = models.ForeignKey(Turn, on_delete=models.CASCADE, related_name="effects")
    kind = models.CharField(max_length=16, choices=KINDS)
    arguments = models.JSONField(default=dict, blank=True)
    created = models.DateTimeField(default=timezone.now)

    tenant_path = "turn__chat__session__tenant"
    objects = TenantScopedManager()


class ChatMove(models.Model):
    """A moveChat done, under the client's `requestId`: a retry of the same request answers the
    same result, and the id reused for another move is refused (AHP's idempotency key)."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    request_id = models.CharField(max_length=200)
    chat_id = models.UUIDField(help_text="The chat moved (it may be disposed since).")
    destination_chat_id = models.UUIDField(help_text="The chat whose session it moved into.")
    result = models.JSONField(help_text="The MoveChatResult answered.")
    created = models.DateTimeField(default=timezone.now)

    tenant_path = "tenant"
    objects = TenantScopedManager()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tenant", "request_id"], name="one_chat_move_per_request")]
