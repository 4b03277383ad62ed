from django.db import models

from grants.models import Tenant, TenantScopedManager


class HostConfig(models.Model):
    """One per tenant: the switches that decide which tools its sessions are offered."""

    ORCHESTRATION_LIMITS = [("on", "on"), ("off", "off")]
    ORCHESTRATION_SCOPES = [("tree", "per session tree"), ("session", "per session")]

    tenant = models.OneToOneField(Tenant, on_delete=models.CASCADE, related_name="host_config")
    session_tools = models.BooleanField(default=True, help_text="Offer the session tools at all.")
    session_tools_providers = models.JSONField(
        default=list, blank=True,
        help_text="Provider ids that get the session tools; empty means every provider.",
    )
    advanced_tools = models.BooleanField(default=False, help_text="Offer tools that need advanced permission.")
    mcp_servers = models.JSONField(null=True, blank=True, help_text="MCP servers every new session is given.")
    client_tool_timeout_ms = models.PositiveIntegerField(
        default=600000, help_text="How long a client may take to run a tool; 0 waits for ever."
    )
    client_tool_call_disconnect_timeout_ms = models.PositiveIntegerField(
        default=30000, help_text="How long a vanished client keeps its owed calls; 0 releases at once."
    )
    agent_orchestration_limits = models.CharField(max_length=3, choices=ORCHESTRATION_LIMITS, default="on")
    agent_orchestration_limits_scope = models.CharField(max_length=8, choices=ORCHESTRATION_SCOPES, default="tree")
    chat_moves_enabled = models.BooleanField(default=True, help_text="Allow moving chats and sessions.")

    tenant_path = "tenant"
    objects = TenantScopedManager()

    # AHP wire key -> model field.
    WIRE_KEYS = {
        "sessionTools": "session_tools",
        "sessionToolsProviders": "session_tools_providers",
        "advancedTools": "advanced_tools",
        "mcpServers": "mcp_servers",
        "clientToolTimeoutMs": "client_tool_timeout_ms",
        "clientToolCallDisconnectTimeoutMs": "client_tool_call_disconnect_timeout_ms",
        "agentOrchestrationLimits": "agent_orchestration_limits",
        "agentOrchestrationLimitsScope": "agent_orchestration_limits_scope",
        "chatMoves.enabled": "chat_moves_enabled",
    }

    def __str__(self):
        return f"host config of {self.tenant.slug}"

    @classmethod
    def for_tenant(cls, tenant):
        config, _ = cls.objects.get_or_create(tenant=tenant)
        return config

    def to_wire(self):
        return {key: getattr(self, field) for key, field in self.WIRE_KEYS.items()}
