import hashlib
import hmac
import secrets

from django.conf import settings
from django.db import models
from django.utils import timezone

from grants.models import TenantScopedManager
from sessions_app.models import Session


class ToolsEndpoint(models.Model):
    """A session's MCP tools endpoint, `/ahp-mcp/<session uuid>`, and its one bearer token.

    Only the token's sha256 is stored. The token itself is an HMAC of the session id and a
    random nonce under SECRET_KEY, so the REST view can hand the same token to every holder of
    session:write without the database ever holding it. The row goes with its session, and so
    the endpoint answers 404 from then on."""

    PREFIX = "ahpmcp"

    session = models.OneToOneField(Session, on_delete=models.CASCADE, related_name="tools_endpoint", primary_key=True)
    nonce = models.CharField(max_length=64, editable=False)
    token_sha256 = models.CharField(max_length=64, editable=False)
    opened_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
        help_text="Who opened the endpoint; empty for a root token. Calls made while no turn runs act as them.",
    )
    created = models.DateTimeField(default=timezone.now)

    tenant_path = "session__tenant"
    objects = TenantScopedManager()

    def __str__(self):
        return f"/ahp-mcp/{self.session_id}"

    @staticmethod
    def _digest(token):
        return hashlib.sha256(token.encode()).hexdigest()

    @classmethod
    def token_for(cls, session_id, nonce):
        mac = hmac.new(settings.SECRET_KEY.encode(), f"{session_id}:{nonce}".encode(), hashlib.sha256).hexdigest()
        return f"{cls.PREFIX}_{mac}"

    @classmethod
    def open(cls, session, opened_by=None):
        nonce = secrets.token_hex(16)
        return cls.objects.create(session=session, nonce=nonce, opened_by=opened_by,
                                  token_sha256=cls._digest(cls.token_for(session.id, nonce)))

    @property
    def token(self):
        return self.token_for(self.session_id, self.nonce)

    @property
    def path(self):
        return f"/ahp-mcp/{self.session_id}"

    def accepts(self, token):
        """True for this endpoint's own token only, compared in constant time."""
        return bool(token) and hmac.compare_digest(self.token_sha256, self._digest(token))


class SessionMcpServers(models.Model):
    """The tenant's mcpServers as they were when the session started (a running session keeps
    them), and what the host last learned of each server's tools."""

    session = models.OneToOneField(Session, on_delete=models.CASCADE, related_name="mcp_servers", primary_key=True)
    servers = models.JSONField(
        null=True, blank=True, help_text="The usable entries of the tenant's mcpServers at start; empty when it had none.",
    )
    server_tools = models.JSONField(
        default=dict, blank=True,
        help_text='Per server name: {"tools": [MCP tool definitions]} or {"error": why it could not be listed}.',
    )
    client_servers = models.JSONField(
        default=dict, blank=True,
        help_text="Per client id: the http servers its plugins' .mcp.json declared, as the client answered.",
    )
    created = models.DateTimeField(default=timezone.now)

    tenant_path = "session__tenant"
    objects = TenantScopedManager()

    class Meta:
        verbose_name = "session MCP servers"
        verbose_name_plural = "session MCP servers"

    def __str__(self):
        return f"MCP servers of {self.session_id}"


class StdioServer(models.Model):
    """An MCP server the operator lets tenants use: its command runs over stdio, in the sandbox
    of each session that picks it by name (`{"type": "stdio", "server": "<name>"}` in a tenant's
    mcpServers). Host-wide: only a superuser defines one; a tenant never names a command."""

    name = models.SlugField(unique=True)
    description = models.CharField(max_length=200, blank=True)
    command = models.CharField(max_length=500, help_text="An absolute path, run inside the session's sandbox.")
    args = models.JSONField(default=list, blank=True, help_text="A list of strings.")
    env = models.JSONField(default=dict, blank=True, help_text="Environment the server starts with (names to strings).")
    read_only_paths = models.JSONField(
        default=list, blank=True,
        help_text="Host folders the server needs to read (its program, a virtualenv); bound read-only into the sandbox.",
    )

    def __str__(self):
        return self.name

    def to_entry(self):
        return {"command": self.command, "args": list(self.args), "env": dict(self.env),
                "readOnlyPaths": list(self.read_only_paths)}
