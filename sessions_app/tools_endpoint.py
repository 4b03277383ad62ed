"""A session's door credential: the bearer tokens of its MCP tools endpoint, and where agents
the host starts reach that endpoint."""
import hashlib
import hmac
import os
import secrets

from django.conf import settings
from django.db import models
from django.utils import timezone

from grants.models import ApiToken, TenantScopedManager

# The address this process last served HTTP on (the endpoint app records it).
LISTENER: dict[str, str] = {}


def remember_listener(scope):
    server_address = scope.get("server")
    if server_address and server_address[1]:
        LISTENER["base"] = f"{scope.get('scheme', 'http')}://{server_address[0]}:{server_address[1]}"


def base_url():
    """Where agents the host starts reach this host: AHP_MCP_BASE_URL, else the listener this
    process last served HTTP on, else runhost's HOST and PORT."""
    configured = os.environ.get("AHP_MCP_BASE_URL")
    if configured:
        return configured.rstrip("/")
    if "base" in LISTENER:
        return LISTENER["base"]
    return f"http://{os.environ.get('HOST', '127.0.0.1')}:{os.environ.get('PORT', '8000')}"


class ToolsEndpoint(models.Model):
    """One bearer token for a session's MCP tools endpoint, `/ahp-mcp/<session uuid>`.

    Each ApiToken that asks gets a token of its own, acting as that token's person with their
    grants at each request, and ending with the ApiToken, the person or their membership. The
    host's own agent for the session (no ApiToken) gets one more, acting as the person whose turn
    it answers. Only the token's sha256 is stored; the token is an HMAC of the session id and a
    random nonce under SECRET_KEY, so asking again hands back the same token."""

    PREFIX = "ahpmcp"

    session = models.ForeignKey("sessions_app.Session", on_delete=models.CASCADE, related_name="tools_endpoints")
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

    @property
    def url(self):
        return f"{base_url()}{self.path}"

    def accepts(self, token):
        """True for this row's own token only, compared in constant time."""
        return bool(token) and hmac.compare_digest(self.token_sha256, self.digest(token))
