"""Loads the catalog's inputs for a chat from the rows, so `assemble_catalog` stays pure."""
from collections import OrderedDict

from sessions_app.models import ActiveClient

from ..definitions.agent_definitions import catalog_allowlist
from ..definitions.copilot_policy import excluded_host_tools
from ..families.mcp_servers.server_tools import session_server_tools
from ..models import AgentDefinition, HostConfig
from .catalog import CatalogInputs, HostSwitches, PermissionRule, assemble_catalog
from .client_rules import published_rules
from .clients import client_tools
from .host_tools import REGISTRY

_CLIENT_TOOLS_CACHE = OrderedDict()
_CLIENT_TOOLS_CACHE_SIZE = 2048


def _bindings_of(active_client):
    """A client's tools are turned into bindings once per announcement, not per model request."""
    key = (active_client.pk, active_client.modified)
    bindings = _CLIENT_TOOLS_CACHE.get(key)
    if bindings is None:
        bindings = client_tools([active_client.to_wire()])
        _CLIENT_TOOLS_CACHE[key] = bindings
        if len(_CLIENT_TOOLS_CACHE) > _CLIENT_TOOLS_CACHE_SIZE:
            _CLIENT_TOOLS_CACHE.popitem(last=False)
    return bindings


def with_server_tools(registry_tools, server_tools):
    """The registry's tools, then the session's MCP servers' tools; a host or plugin tool of the
    same name wins (a plugin may override an MCP tool)."""
    if not server_tools:
        return registry_tools
    taken = {t.effective_name for t in registry_tools}
    return registry_tools + tuple(t for t in server_tools if t.effective_name not in taken)


def catalog_inputs(session, chat_origin_kind="user", host_config=None):
    config = host_config or HostConfig.for_tenant(session.tenant)
    clients = ActiveClient.objects.filter(session=session).order_by("id")
    tools = with_server_tools(REGISTRY.tools, session_server_tools(session))
    document = AgentDefinition.document_for_session(session)
    return CatalogInputs(
        switches=HostSwitches.of(config),
        provider=session.provider,
        chat_origin_kind=chat_origin_kind,
        tools=tools,
        client_tools=tuple(b for client in clients for b in _bindings_of(client)),
        allowlist=catalog_allowlist(document, tools) if document else (),
        permission_rules=tuple(PermissionRule(a, "deny") for a in excluded_host_tools(document)) if document else (),
        client_rules=tuple(rule for client in clients for rule in published_rules(client.customizations)),
        session=session,
    )


def catalog_for_chat(chat):
    """The snapshot for one model request in `chat`."""
    return assemble_catalog(catalog_inputs(chat.session, chat.origin_kind))
