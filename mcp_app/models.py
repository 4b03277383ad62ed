import hashlib
import hmac
import secrets

from django.conf import settings
from django.db import models
from django.utils import timezone

from grants.models import ApiToken, TenantScopedManager
from sessions_app.models import Session


class ToolsEndpoint(models.Model):
    """One bearer token for a session's MCP tools endpoint, `/ahp-mcp/<session uuid>`.

    Each ApiToken that asks gets a token of its own, acting as that token's person with their
    grants at each request, and ending with the ApiToken, the person or their membership. The
    host's own agent for the session (no ApiToken) gets one more, acting as the person whose turn
    it answers. Only the token's sha256 is stored; the token is an HMAC of the session id and a
    random nonce under SECRET_KEY, so asking again hands back the same token."""

    PREFIX = "ahpmcp"

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="tools_endpoints")
    api_token = models.ForeignKey(
        ApiToken, null=True, blank=True, on_delete=models.CASCADE, related_name="tools_endpoints",
        help_text="The token that asked for it, whose person the calls act as; empty for the agent the host "
                  "starts, whose calls act as the person whose turn it answers.",
    )
    nonce = models.CharField(max_length=64, editable=False)
    token_sha256 = models.CharField(max_length=64, editable=False, unique=True)
    created = models.DateTimeField(default=timezone.now)

    tenant_path = "session__tenant"
    objects = TenantScopedManager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["session", "api_token"], name="tools_endpoint_per_token"),
            models.UniqueConstraint(fields=["session"], condition=models.Q(api_token__isnull=True),
                                    name="tools_endpoint_one_agent"),
        ]

    def __str__(self):
        return f"/ahp-mcp/{self.session_id} for {self.api_token or 'the host agent'}"

    @staticmethod
    def digest(token):
        return hashlib.sha256(token.encode()).hexdigest()

    @classmethod
    def token_for(cls, session_id, nonce):
        mac = hmac.new(settings.SECRET_KEY.encode(), f"{session_id}:{nonce}".encode(), hashlib.sha256).hexdigest()
        return f"{cls.PREFIX}_{mac}"

    @classmethod
    def open(cls, session, api_token=None):
        nonce = secrets.token_hex(16)
        return cls.objects.create(session=session, nonce=nonce, api_token=api_token,
                                  token_sha256=cls.digest(cls.token_for(session.id, nonce)))

    @property
    def token(self):
        return self.token_for(self.session_id, self.nonce)

    @property
    def path(self):
        return f"/ahp-mcp/{self.session_id}"

    def accepts(self, token):
        """True for this row's own token only, compared in constant time."""
        return bool(token) and hmac.compare_digest(self.token_sha256, self.digest(token))


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
