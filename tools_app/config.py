"""HostConfig and the one table of its keys.

Each row of KEYS names a key on the wire and in the database, says what kind of value it holds,
gives its default and explains it. The model's fields (each declared by name, made from its row),
the admin form, the REST serializer, the checks every write passes (root/configChanged, REST,
admin) and the root state's config schema are all made from the table: a key is added, renamed or
reworded here and nowhere else."""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from django.core.exceptions import ImproperlyConfigured
from django.db import models
from django.db.models.expressions import Combinable
from django.utils import timezone

from grants.models import Tenant, TenantScopedQuerySet
from kernel.lru_cache import LruCache

from .agent_connections import check_agent_connections, masked_agent_connections, stored_agent_connections
from .credentials import masked_mcp_servers, stored_mcp_servers
from .mcp_server_entries import check_mcp_servers

MAX_CONFIG_BYTES = 256 * 1024


class ConfigInvalid(ValueError):
    pass


@dataclass(frozen=True)
class Key:
    """One configuration key. `kind` (a name in KINDS) decides how its value is checked,
    stored, edited and described."""

    wire: str
    field: str
    kind: str
    default: Any
    title: str
    help: str
    choices: tuple = ()  # (value, label) pairs, for a choice
    runhost_flag: bool = False  # runhost sets it for the demo tenant from the command line

    @property
    def form_name(self) -> str:
        """The wire name without its dots (an HTML form field name): chatMoves.enabled -> chatMovesEnabled."""
        first, *rest = self.wire.split(".")
        return first + "".join(part[:1].upper() + part[1:] for part in rest)

    @property
    def description(self) -> str:
        return f"{self.help} Default {self.default}." if self.kind == "milliseconds" else self.help

    def check(self, value: Any) -> Any:
        """`value` if it is one this key may hold, else ConfigInvalid naming the key."""
        return KINDS[self.kind].check(self, value)


KEYS = (
    Key("sessionTools", "session_tools", "boolean", True, "Session tools",
        "Offer the session tools (list, create and message sessions) to agents at all.", runhost_flag=True),
    Key("sessionToolsProviders", "session_tools_providers", "providers", [], "Session tools providers",
        "Provider ids that get the session tools; empty means every provider.", runhost_flag=True),
    Key("advancedTools", "advanced_tools", "boolean", False, "Advanced tools",
        "Offer tools that need advanced permission.", runhost_flag=True),
    Key("mcpServers", "mcp_servers", "servers", None, "MCP servers",
        'MCP servers every new session is given, by name. Credentials (env and headers values) read "<set>"; '
        "sent back so, they keep their stored values."),
    Key("clientToolTimeoutMs", "client_tool_timeout_ms", "milliseconds", 600000, "Client tool timeout, ms",
        "How long a client may take to run a tool before the call fails; 0 waits for ever."),
    Key("clientToolCallDisconnectTimeoutMs", "client_tool_call_disconnect_timeout_ms", "milliseconds", 30000,
        "Client disconnect grace, ms", "How long a vanished client keeps the calls it owes; 0 releases them at once."),
    Key("agentOrchestrationLimits", "agent_orchestration_limits", "choice", "on", "Agent orchestration limits",
        "on: spawn depth and per-hour counts of sessions, chats and messages are limited; off: neither.",
        choices=(("on", "on"), ("off", "off"))),
    Key("agentOrchestrationLimitsScope", "agent_orchestration_limits_scope", "choice", "tree",
        "Orchestration limits scope", "tree: counts are kept per session tree; session: per session.",
        choices=(("tree", "per session tree"), ("session", "per session"))),
    Key("chatMoves.enabled", "chat_moves_enabled", "boolean", True, "Chat moves", "Allow moving chats and sessions."),
    Key("agentConnections", "agent_connections", "connections", None, "Agent connections",
        'Per provider, its model endpoint: {"claude": {"baseUrl", "apiKey", "model"}, "github-copilot": {"type", '
        '"baseUrl", "apiKey", "wireApi", "model"} or {"githubToken"}, "acp": {"agent": "<an operator\'s ACP agent>"}}. '
        'The host\'s environment applies where a tenant sets nothing. Credentials read "<set>"; sent back so, they '
        "keep their stored values."),
    Key("plugins", "plugins", "plugins", None, "Plugins",
        'Per agent plugin (a provider id such as "claude"), {"hostTools": true or false}: whether its sessions take '
        "the host's own tools (session, artifact, comment, Agent Merge, resource, terminal and wakeup tools), handed "
        "to the agent as one MCP server. A plugin not named takes them."),
)
BY_WIRE = {key.wire: key for key in KEYS}


def _boolean(key: Key, value: Any) -> Any:
    if not isinstance(value, bool):
        raise ConfigInvalid(f"{key.wire} must be true or false.")
    return value


def _providers(key: Key, value: Any) -> Any:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ConfigInvalid(f"{key.wire} must be a list of provider ids.")
    return value


def _servers(key: Key, value: Any) -> Any:
    problem = check_mcp_servers(value)
    if problem:
        raise ConfigInvalid(problem)
    return value


def _connections(key: Key, value: Any) -> Any:
    problem = check_agent_connections(key.wire, value)
    if problem:
        raise ConfigInvalid(problem)
    return value


PLUGIN_SETTINGS = ("hostTools",)


def _plugins(key: Key, value: Any) -> Any:
    if value is None:
        return value
    if not isinstance(value, dict) or not all(isinstance(name, str) and name for name in value):
        raise ConfigInvalid(f"{key.wire} must be an object mapping plugin names to their settings.")
    for name, settings in value.items():
        if not isinstance(settings, dict):
            raise ConfigInvalid(f"{key.wire}.{name} must be an object such as {{\"hostTools\": false}}.")
        unknown = sorted(set(settings) - set(PLUGIN_SETTINGS))
        if unknown:
            raise ConfigInvalid(f"{key.wire}.{name}.{unknown[0]} is not a plugin setting; the one there is: hostTools.")
        if "hostTools" in settings and not isinstance(settings["hostTools"], bool):
            raise ConfigInvalid(f"{key.wire}.{name}.hostTools must be true or false.")
    return value


def _milliseconds(key: Key, value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 2**31 - 1:
        raise ConfigInvalid(f"{key.wire} must be a whole number of milliseconds, 0 or more.")
    return value


def _choice(key: Key, value: Any) -> Any:
    values = [choice for choice, _ in key.choices]
    if value not in values:
        raise ConfigInvalid(f"{key.wire} must be one of {', '.join(repr(c) for c in values)}.")
    return value


@dataclass(frozen=True)
class Kind:
    """How a kind of value is checked and described in the ConfigSchema."""

    check: Callable[[Key, Any], Any]
    schema: Callable[[Key], dict[str, Any]]


def _choice_schema(key: Key) -> dict[str, Any]:
    return {"type": "string", "enum": [value for value, _ in key.choices],
            "enumLabels": [label for _, label in key.choices]}


KINDS = {
    "boolean": Kind(_boolean, lambda key: {"type": "boolean"}),
    "providers": Kind(_providers, lambda key: {"type": "array", "items": {"type": "string", "title": "Provider id"}}),
    "servers": Kind(_servers,
                    lambda key: {"type": "object", "additionalProperties": {"type": "object", "title": "MCP server"}}),
    "connections": Kind(_connections, lambda key: {"type": "object", "additionalProperties": {
                        "type": "object", "title": "Agent connection"}}),
    "plugins": Kind(_plugins, lambda key: {"type": "object", "additionalProperties": {
                    "type": "object", "title": "Plugin", "properties": {"hostTools": {
                        "type": "boolean", "title": "Host tools",
                        "description": "Whether the plugin's sessions take the host's own tools."}}}}),
    "milliseconds": Kind(_milliseconds, lambda key: {"type": "number"}),
    "choice": Kind(_choice, _choice_schema),
}


# HostConfig's field of each kind of key, made from the key's row (its default and help).
def _row(wire: str, *kinds: str) -> Key:
    key = BY_WIRE[wire]
    if key.kind not in kinds:
        raise ImproperlyConfigured(f"{wire} holds a {key.kind}, not a {' or '.join(kinds)}.")
    return key


def boolean_field(wire: str) -> models.BooleanField[bool | Combinable, bool]:
    key = _row(wire, "boolean")
    return models.BooleanField(default=key.default, help_text=key.help)


def list_field(wire: str) -> models.JSONField:
    """A list default must be a callable, so every row gets its own list."""
    key = _row(wire, "providers")
    return models.JSONField(default=list, blank=True, help_text=key.help)


def object_field(wire: str) -> models.JSONField:
    key = _row(wire, "servers", "connections", "plugins")
    return models.JSONField(null=True, blank=True, help_text=key.help)


def milliseconds_field(wire: str) -> models.PositiveIntegerField[int | Combinable, int]:
    key = _row(wire, "milliseconds")
    return models.PositiveIntegerField(default=key.default, help_text=key.help)


def choice_field(wire: str) -> models.CharField[str | Combinable, str]:
    key = _row(wire, "choice")
    return models.CharField(max_length=8, choices=list(key.choices), default=key.default, help_text=key.help)


class StampedQuerySet(TenantScopedQuerySet):
    """Rows with a `modified` stamp that caches compare (tools_app.catalog.loader): an update()
    stamps it as a save does, so a bulk write is seen as a change in every process too."""

    def update(self, **kwargs: Any) -> int:
        kwargs.setdefault("modified", timezone.now())
        return super().update(**kwargs)


StampedManager = models.Manager.from_queryset(StampedQuerySet)


class HostConfig(models.Model):
    """One per tenant: the switches that decide which tools its sessions are offered."""

    tenant = models.OneToOneField(Tenant, on_delete=models.CASCADE, related_name="host_config")
    # One field per row of KEYS, in its order, named by its `field`.
    session_tools = boolean_field("sessionTools")
    session_tools_providers = list_field("sessionToolsProviders")
    advanced_tools = boolean_field("advancedTools")
    mcp_servers = object_field("mcpServers")
    client_tool_timeout_ms = milliseconds_field("clientToolTimeoutMs")
    client_tool_call_disconnect_timeout_ms = milliseconds_field("clientToolCallDisconnectTimeoutMs")
    agent_orchestration_limits = choice_field("agentOrchestrationLimits")
    agent_orchestration_limits_scope = choice_field("agentOrchestrationLimitsScope")
    chat_moves_enabled = boolean_field("chatMoves.enabled")
    agent_connections = object_field("agentConnections")
    plugins = object_field("plugins")
    modified = models.DateTimeField(auto_now=True)

    tenant_path = "tenant"
    objects = StampedManager()

    def __str__(self) -> str:
        return f"host config of {self.tenant.slug}"

    @classmethod
    def for_tenant(cls, tenant: Tenant) -> HostConfig:
        """The tenant's row to write, made with every key's default if it has none yet. A reader
        asks `current`, which makes nothing."""
        config, _ = cls.objects.get_or_create(tenant=tenant)
        return config

    @classmethod
    def current(cls, tenant: Tenant) -> HostConfig:
        """The tenant's configuration as it is now (every key's default, unsaved, before its first
        write), kept in this process while its `modified` stamp stays the same (a write anywhere
        changes it as it commits): one indexed read of the stamp instead of the row. Shared with
        every caller of this process: read it, never change it."""
        stamp = cls.objects.filter(tenant_id=tenant.pk).values_list("modified", flat=True).first()
        kept = _KEPT_CONFIGS.get(tenant.pk)
        if kept is not None and kept[0] == stamp:
            return kept[1]
        # Read after its stamp: never older than what it is kept under.
        config = cls.objects.filter(tenant_id=tenant.pk).first() or cls(tenant=tenant)
        return _KEPT_CONFIGS.put(tenant.pk, (stamp, config))[1]


_KEPT_CONFIGS = LruCache(4096)  # tenant id -> (the stamp it was read under, HostConfig)


def checked_changes(changes: Any, replace: bool = False) -> dict[str, Any]:
    """{model field: value} for wire `changes`; with `replace`, omitted keys return to defaults.
    An unknown key or a bad value raises ConfigInvalid naming it."""
    if not isinstance(changes, dict):
        raise ConfigInvalid("config must be an object.")
    unknown = sorted(set(changes) - set(BY_WIRE))
    if unknown:
        raise ConfigInvalid(f"Unknown configuration key {unknown[0]}.")
    fields = {}
    if replace:
        for key in KEYS:
            fields[key.field] = cast(models.Field, HostConfig._meta.get_field(key.field)).get_default()
    for wire, value in changes.items():
        fields[BY_WIRE[wire].field] = BY_WIRE[wire].check(value)
    return fields


def apply_changes(config: HostConfig, fields: dict[str, Any]) -> HostConfig:
    """Set checked `fields` on `config` as they are stored: a credential sent back as shown keeps
    its stored value, any other is sealed. ConfigInvalid when what would be stored may not be."""
    fields = dict(fields)
    if "mcp_servers" in fields:
        fields["mcp_servers"] = stored_mcp_servers(fields["mcp_servers"], config.mcp_servers)
    if "agent_connections" in fields:
        fields["agent_connections"] = stored_agent_connections(fields["agent_connections"], config.agent_connections)
        # A key sent back as "<set>" with none stored is dropped: judge what is stored, not what was sent.
        BY_WIRE["agentConnections"].check(fields["agent_connections"])
    for field, value in fields.items():
        setattr(config, field, value)
    # Measured as stored (credentials sealed, not masked) and as root subscribers get it, in one message.
    stored = {key.wire: getattr(config, key.field) for key in KEYS}
    size = max(len(json.dumps(values).encode()) for values in (stored, wire_values(config)))
    if size > MAX_CONFIG_BYTES:
        raise ConfigInvalid(f"The configuration would take {size} bytes; a tenant's configuration holds at most "
                            f"{MAX_CONFIG_BYTES}.")
    return config


def wire_values(config: HostConfig) -> dict[str, Any]:
    """`config` under its wire keys, as root subscribers, REST and the admin see it: credentials masked."""
    values = {key.wire: getattr(config, key.field) for key in KEYS}
    values["mcpServers"] = masked_mcp_servers(values["mcpServers"])
    values["agentConnections"] = masked_agent_connections(values["agentConnections"])
    return values


def config_schema() -> dict[str, Any]:
    """The AHP ConfigSchema of every key: a JSON Schema property with title, description and
    default (where there is one) each, for the root state's `config.schema`."""
    properties = {}
    for key in KEYS:
        schema = {**KINDS[key.kind].schema(key), "title": key.title, "description": key.description}
        if key.default is not None:
            schema["default"] = key.default
        properties[key.wire] = schema
    return {"type": "object", "properties": properties}
