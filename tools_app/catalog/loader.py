"""Loads the catalog's inputs for a chat from the rows, so `assemble_catalog` stays pure."""
from collections import OrderedDict

from sessions_app.models import ActiveClient

from ..definitions.agent_definitions import catalog_allowlist
from ..definitions.copilot_policy import excluded_host_tools
from ..families.mcp_servers.server_tools import session_server_tools
from ..models import AgentDefinition, HostConfig
from .catalog import CatalogInputs, HostSwitches, PermissionRule, assemble_catalog
from .client_rules import published_rules
from .clients import client_tool_entries
from .host_tools import REGISTRY
from .registry import Binding

_CLIENT_TOOLS_CACHE = OrderedDict()
_CLIENT_TOOLS_CACHE_SIZE = 2048


def _entries_of(active_client):
    """A client's tools are turned into bindings (and HiddenTools for the invalid ones) once per
    announcement, not per model request."""
    key = (active_client.pk, active_client.modified)
    entries = _CLIENT_TOOLS_CACHE.get(key)
    if entries is None:
        entries = client_tool_entries([active_client.to_wire()])
        _CLIENT_TOOLS_CACHE[key] = entries
        if len(_CLIENT_TOOLS_CACHE) > _CLIENT_TOOLS_CACHE_SIZE:
            _CLIENT_TOOLS_CACHE.popitem(last=False)
    return entries


def with_server_tools(registry_tools, server_tools):
    """The registry's tools, then the session's MCP servers' tools; a host or plugin tool of the
    same name wins (a plugin may override an MCP tool)."""
    if not server_tools:
        return registry_tools
    taken = {t.effective_name for t in registry_tools}
    return registry_tools + tuple(t for t in server_tools if t.effective_name not in taken)


def catalog_inputs(session, chat_origin_kind="user", host_config=None):
    config = host_config or HostConfig.for_tenant(session.tenant)
    # A session not yet created (the explainer's preview) has no clients yet.
    clients = () if session._state.adding else ActiveClient.objects.filter(session=session).order_by("id")
    tools = with_server_tools(REGISTRY.tools, () if session._state.adding else session_server_tools(session))
    entries = [entry for client in clients for entry in _entries_of(client)]
    document = AgentDefinition.document_for_session(session)
    return CatalogInputs(
        switches=HostSwitches.of(config),
        provider=session.provider,
        chat_origin_kind=chat_origin_kind,
        tools=tools,
        client_tools=tuple(entry for entry in entries if isinstance(entry, Binding)),
        invalid_tools=tuple(entry for entry in entries if not isinstance(entry, Binding)),
        allowlist=catalog_allowlist(document, tools) if document else (),
        permission_rules=tuple(PermissionRule(a, "deny") for a in excluded_host_tools(document)) if document else (),
        client_rules=tuple(rule for client in clients for rule in published_rules(client.customizations)),
        session=session,
    )


def catalog_for_chat(chat):
    """The snapshot for one model request in `chat`."""
    return assemble_catalog(catalog_inputs(chat.session, chat.origin_kind))


def preview_catalog(tenant, provider, chat_origin_kind="user", agent_definition=""):
    """The snapshot a session not yet created would get: `provider`, optionally started with
    `agent_definition`, in a chat of `chat_origin_kind`, before any client joins."""
    from sessions_app.models import Session

    config = {"agentDefinition": agent_definition} if agent_definition else {}
    return assemble_catalog(catalog_inputs(Session(tenant=tenant, provider=provider, config=config), chat_origin_kind))
