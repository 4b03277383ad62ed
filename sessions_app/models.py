import functools
import json
from datetime import timezone as dt_timezone
import uuid

from django.conf import settings
from django.db import connection, models
from django.utils import timezone

from grants.algebra import holds, known_grants
from grants.models import Tenant, TenantScopedManager, TenantScopedQuerySet
from kernel.rows import insert_then, table

SESSION_URI_PREFIX = "ahp-session:/"
CHAT_URI_PREFIX = "ahp-chat:/"


def iso(moment):
    """AHP timestamps: ISO 8601 in UTC with milliseconds and a Z."""
    return moment.astimezone(dt_timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


# A session's published tools (the host's definitions with their schemas, tens of KB) are read
# by its snapshot alone; the work of its turns, which reads the session at every step, leaves
# them unread (decoding them was most of a host call's completion).
PUBLISHED_TOOLS = "server_tools"


class SessionQuerySet(TenantScopedQuerySet):
    def visible_to(self, principal):
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

    def listed(self):
        """Without the columns no listing reads and that grow with the session: its published
        tools (the host's definitions with their schemas), config and _meta. Decoding them was
        a tenth of a serving process's time under load, for rows a listing shows a line of."""
        return self.defer(PUBLISHED_TOOLS, "config", "meta")


SessionManager = models.Manager.from_queryset(SessionQuerySet)


class TurnQuerySet(TenantScopedQuerySet):
    def with_chat(self):
        """Each turn with its chat and session, as a turn's work reads them: all but the
        session's published tools."""
        return self.select_related("chat__session").defer(f"chat__session__{PUBLISHED_TOOLS}")


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

    def __str__(self):
        return self.title or str(self.id)

    def save(self, *args, **kwargs):
        if self.root_id is None and self.parent_id is None:
            self.root_id = self.id
        super().save(*args, **kwargs)

    @property
    def uri(self):
        return f"{SESSION_URI_PREFIX}{self.id}"

    @property
    def wire_status(self):
        return self.status | (self.IS_READ if self.read else 0) | (self.IS_ARCHIVED if self.archived else 0)

    def summary(self):
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

    def __str__(self):
        return self.title or str(self.id)

    @property
    def uri(self):
        return f"{CHAT_URI_PREFIX}{self.id}"

    def origin(self):
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

    @classmethod
    def append_part_if_active(cls, turn_id, part, new_row):
        """Append `part` to the active turn's response_parts in one UPDATE, computed in the
        statement (the row is not read first, and a part another writer appended meanwhile is
        kept), which locks the turn until commit, and write `new_row` (the part's own row, a
        tool call) with it, on PostgreSQL in the same statement. Answers whether the turn was
        still active; if not, the caller's transaction must not commit the row (it raises)."""
        params = [json.dumps(part), cls._meta.pk.get_db_prep_value(turn_id, connection)]
        return insert_then(new_row, _append_part_sql(), params) == 1

    def message(self):
        """The wire Message that started it."""
        message = {"text": self.text, "origin": {"kind": self.origin_kind}}
        if self.model:
            message["model"] = {"id": self.model}
        return message


@functools.cache
def _append_part_sql():
    parts = "response_parts"
    appended = (f"({parts} || jsonb_build_array(%s::jsonb))" if connection.vendor == "postgresql"
                else f"json_insert({parts}, '$[#]', json(%s))")
    return f"UPDATE {table(Turn)} SET {parts} = {appended} WHERE id = %s AND state = 'active'"


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
    def wire_kind(self):
        return "steering" if self.delivery == "steer" else "queued"

    def to_wire(self):
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
    def is_terminal(self):
        return self.status in self.TERMINAL

    @property
    def contributor(self):
        return {"kind": "client", "clientId": self.contributor_client_id} if self.contributor_client_id else None

    def input_text(self):
        """The input as the wire shows it. Keys sorted: PostgreSQL's jsonb reorders them, and a
        snapshot read back must say what the action said."""
        return json.dumps(self.input, sort_keys=True)

    def invocation_message(self):
        return f"Running {self.display_name or self.tool_name}"

    def state(self):
        """The AHP ToolCallState of this call."""
        state = {"toolCallId": str(self.id), "toolName": self.tool_name, "displayName": self.display_name or self.tool_name}
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

    def to_wire(self):
        wire = {"clientId": self.client_id, "tools": self.tools}
        if self.display_name:
            wire["displayName"] = self.display_name
        if self.customizations is not None:
            wire["customizations"] = self.customizations
        return wire


class ServerSeq(models.Model):
    """One tenant's action counter. Locked while one of its actions is written, so the tenant's
    serverSeq is gap-free and a snapshot taken under the same lock is consistent with it; no
    tenant waits on another's."""

    tenant = models.OneToOneField(Tenant, on_delete=models.CASCADE, related_name="+")
    value = models.BigIntegerField(default=0)


class ActionLog(models.Model):
    """Every published action, kept (bounded, per tenant) so `reconnect` can replay what a client
    missed. `id` orders rows across tenants (this process's log tail); `seq` is the tenant's."""

    seq = models.BigIntegerField()
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    channel = models.CharField(max_length=200)
    envelope = models.JSONField()
    process = models.CharField(max_length=64, help_text="The process that published it.")
    created = models.DateTimeField(default=timezone.now)

    tenant_path = "tenant"
    objects = TenantScopedManager()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tenant", "seq"], name="actionlog_tenant_seq")]
        indexes = [models.Index(fields=["tenant", "channel", "seq"], name="actionlog_tenant_channel_seq")]


class HostProcess(models.Model):
    """A host process that runs turns or holds sockets and terminals, refreshing `seen` while it
    lives. What names a process whose row went stale (or never came) is that of a dead process:
    the sweep ends its turns and terminals."""

    name = models.CharField(max_length=64, primary_key=True)
    seen = models.DateTimeField(default=timezone.now, db_index=True)
    node = models.CharField(max_length=64, blank=True, help_text="The node (machine) the process runs on.")

    def __str__(self):
        return f"{self.name} on {self.node or 'a node'} at {self.seen:%Y-%m-%d %H:%M:%S}"


class SessionHome(models.Model):
    """Where a session's files and processes are touched (its terminals, its turns' agents): one
    host process, on one node. Its lease is that process's HostProcess row; a home whose process
    stopped renewing it is taken by the next live process a request for the session reaches."""

    session = models.OneToOneField(Session, on_delete=models.CASCADE, primary_key=True, related_name="home")
    process = models.CharField(max_length=64)
    node = models.CharField(max_length=64, blank=True)
    since = models.DateTimeField(default=timezone.now)

    def __str__(self):
        return f"{self.session_id} at {self.process} on {self.node}"


class ClientConnection(models.Model):
    """One open WebSocket. Its process refreshes `seen`; a row not seen for a while belongs to
    a process that died, and the sweep treats it as closed."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    client_id = models.CharField(max_length=128, blank=True)
    person = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE,
                               related_name="+", help_text="Whose token opened it; empty for the tenant's root.")
    process = models.CharField(max_length=64)
    channel = models.CharField(max_length=200, blank=True,
                               help_text="Its socket's channel-layer channel: what the host asks the client goes there.")
    seen = models.DateTimeField(default=timezone.now)
    subscriptions = models.JSONField(default=list, blank=True)

    tenant_path = "tenant"
    objects = TenantScopedManager()

    class Meta:
        indexes = [models.Index(fields=["client_id"], name="connection_client"),
                   models.Index(fields=["seen"], name="connection_seen")]


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


class SessionPlacement(models.Model):
    """Where a nested session sits among its siblings (move_session reorders them)."""

    session = models.OneToOneField(Session, on_delete=models.CASCADE, primary_key=True, related_name="placement")
    position = models.FloatField(default=0)

    tenant_path = "session__tenant"
    objects = TenantScopedManager()


from .tools_endpoint import ToolsEndpoint  # noqa: E402,F401  (a model of this app, in a module of its own)
