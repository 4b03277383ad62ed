import logging

from django.core.exceptions import NON_FIELD_ERRORS, ValidationError
from django.db import models

from grants.models import Tenant, TenantScopedManager
from sessions_app.models import ToolCall

from .config import HostConfig, StampedManager  # noqa: F401  (HostConfig is defined beside its table of keys)
from .definitions.agent_definitions import AgentDefinitionInvalid, validate_definition
from .definitions.copilot_policy import builtin_tool_policy, builtin_tools_pointer

logger = logging.getLogger(__name__)


class AgentDefinition(models.Model):
    """An agent a tenant defines. The schema in tools_app/definitions/schemas/agent_definition.json is the
    gate: a definition is checked when it is saved and again whenever it is loaded for use."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="agent_definitions")
    name = models.CharField(max_length=100)
    provider = models.CharField(max_length=64, help_text='Who runs the agent, e.g. "github-copilot".')
    model = models.CharField(max_length=200, blank=True)
    instructions = models.TextField(blank=True)
    tools = models.JSONField(
        default=list, blank=True,
        help_text='A JSON list of tool entries; empty offers every tool. Each entry is an object with a "kind": '
                  'a tool\'s name ({"kind": "read"}), an MCP server of the tenant\'s mcpServers ({"kind": "mcp", '
                  '"serverName": "github", "allowedTools": ["list_issues"]}), another of the tenant\'s agent '
                  'definitions ({"kind": "agent-definition", "name": "reviewer"}), or the CLI built-ins offered '
                  '({"kind": "github-cli-builtin-tools", "available-tools": {"tools": ["bash"]}}).',
    )
    modified = models.DateTimeField(auto_now=True)

    tenant_path = "tenant"
    objects = StampedManager()

    DOCUMENT_KEYS = ("name", "provider", "model", "instructions", "tools")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tenant", "name"], name="agent_definition_unique_per_tenant")]

    def __str__(self):
        return f"{self.tenant.slug}/{self.name}"

    @classmethod
    def load(cls, tenant, **lookup):
        """The tenant's definition matching `lookup`, refused if it no longer passes the gate
        (rows written around the model, or a schema that has since tightened)."""
        definition = cls.objects.for_tenant(tenant).get(**lookup)
        definition.validated_document()
        return definition

    @classmethod
    def document_for_session(cls, session):
        """The validated document of the definition `session.config.agentDefinition` names, or
        None. One gone or no longer valid restricts nothing: the catalog is visibility only,
        and each tool still checks its own grant."""
        name = (session.config or {}).get("agentDefinition")
        if not name:
            return None
        try:
            return cls.objects.for_tenant(session.tenant).get(name=name).validated_document()
        except (cls.DoesNotExist, AgentDefinitionInvalid) as error:
            logger.warning("Session %s: agent definition %r left out of its catalog: %s", session.pk, name, error)
            return None

    def document(self):
        """The definition as the schema sees it; empty optional fields are left out."""
        document = {"name": self.name, "provider": self.provider}
        if self.model:
            document["model"] = self.model
        if self.instructions:
            document["instructions"] = self.instructions
        document["tools"] = self.tools
        return document

    def set_document(self, document):
        self.name = document.get("name", "")
        self.provider = document.get("provider", "")
        self.model = document.get("model") or ""
        self.instructions = document.get("instructions") or ""
        self.tools = document.get("tools", [])

    def validated_document(self):
        """The document, or AgentDefinitionInvalid naming the offending value by JSON pointer."""
        document = validate_definition(self.document())
        builtin_tool_policy(document)  # the client-mode interlock, for definitions that bypassed the schema
        return document

    def names_problem(self) -> AgentDefinitionInvalid | None:
        """A provider this host does not run, or an MCP server the tenant's mcpServers does not
        name: refused when saved (a definition loaded later is not, so a server removed since
        only stops offering its tools)."""
        from agents.registry import PROVIDERS

        if self.provider and self.provider not in PROVIDERS:
            return AgentDefinitionInvalid("/provider", f'No provider "{self.provider}" runs on this host; '
                                                       f'it runs {", ".join(sorted(PROVIDERS))}.')
        servers = HostConfig.current(self.tenant).mcp_servers or {} if self.tenant_id else {}
        for index, entry in enumerate(self.tools if isinstance(self.tools, list) else ()):
            if isinstance(entry, dict) and entry.get("kind") == "mcp" and entry.get("serverName") not in servers:
                return AgentDefinitionInvalid(f"/tools/{index}/serverName",
                                              f'Tenant {self.tenant.slug} has no MCP server "{entry.get("serverName")}" '
                                              "in its mcpServers.")
        return None

    def clean(self):
        try:
            self.validated_document()
            if problem := self.names_problem():
                raise problem
        except AgentDefinitionInvalid as error:
            field = error.field if error.field in self.DOCUMENT_KEYS else NON_FIELD_ERRORS
            raise ValidationError({field: str(error)}) from error

    def save(self, *args, **kwargs):
        self.validated_document()
        super().save(*args, **kwargs)

    def builtin_tool_policy(self):
        return builtin_tool_policy(self.validated_document())

    def builtin_tools_invalid(self, field, message):
        """The refusal of `field` of this definition's built-in tools entry, for its provider to raise."""
        return AgentDefinitionInvalid(f"{builtin_tools_pointer(self.document())}/{field}", message)

    def to_dict(self):
        return {"id": self.pk, **self.document(), "modified": self.modified.isoformat()}


class FullToolOutput(models.Model):
    """The whole text of a tool result that was cut before the model saw it; `ahp_resource`
    reads it back at `ahp-tool-output:/<tool call id>`."""

    call = models.OneToOneField(ToolCall, primary_key=True, on_delete=models.CASCADE, related_name="full_output")
    text = models.TextField()

    tenant_path = "call__turn__chat__session__tenant"
    objects = TenantScopedManager()


# The tool families' rows, models of this app kept beside the family they serve.
from .families.agent_merge.models import AgentMergeConfig, AgentMergeRepair, CIEvidence, DeferredRerun, PullRequestWatch  # noqa: E402,F401
from .families.comments.models import Annotation, Question  # noqa: E402,F401
from .families.computers.models import Computer  # noqa: E402,F401
from .families.mcp_servers.models import SessionMcpServers, StdioServer  # noqa: E402,F401
from .families.terminals.models import Terminal  # noqa: E402,F401
from .families.wakeups.models import Wakeup  # noqa: E402,F401
