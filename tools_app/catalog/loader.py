"""Loads the catalog's inputs for a chat from the rows, so `assemble_catalog` stays pure, and
keeps each chat's snapshot while those rows stay as they were.

A kept snapshot is checked against the rows on every use, in one query: the `modified` stamps of
the tenant's HostConfig, the session's MCP listing and its agent definition, and the id and stamp
of each of its active clients. Every write of those rows (a configuration or plugin setting, a
definition, a client's announcement or departure, an MCP server listing) changes what that query
answers in every process at the moment it commits, so no process offers a snapshot older than
the rows (a broadcast would leave a window after each write, and the embedded layer reaches no
other process). The session's own fields the hooks read (provider, config, working directories)
and the registry's tools are part of the key as the caller holds them.
"""
import json
from collections.abc import Sequence

from kernel.lru_cache import LruCache
from sessions_app.models import ActiveClient, Chat, Session

from ..definitions.agent_definitions import catalog_allowlist
from ..definitions.copilot_policy import excluded_host_tools
from ..families.mcp_servers.server_tools import session_server_tools
from ..families.session.listing import startable_agents
from ..models import AgentDefinition, HostConfig
from ..queries import catalog_stamp
from .catalog import CatalogInputs, CatalogSnapshot, HostSwitches, PermissionRule, assemble_catalog
from .client_rules import published_rules
from .clients import client_tool_entries
from .hidden import HiddenTool
from .host_tools import REGISTRY
from .registry import Binding, Tool

_CLIENT_TOOLS = LruCache(2048)  # (active client pk, modified) -> its bindings and hidden tools


def _entries_of(active_client: ActiveClient) -> tuple[Binding | HiddenTool, ...]:
    """A client's tools are turned into bindings (and HiddenTools for the invalid ones) once per
    announcement, not per model request."""
    key = (active_client.pk, active_client.modified)
    return _CLIENT_TOOLS.get_or_make(key, lambda: client_tool_entries([active_client.to_wire()]))


def with_server_tools(registry_tools: tuple[Tool, ...], server_tools: Sequence[Tool]) -> tuple[Tool, ...]:
    """The registry's tools, then the session's MCP servers' tools; a host or plugin tool of the
    same name wins (a plugin may override an MCP tool)."""
    if not server_tools:
        return registry_tools
    taken = {t.effective_name for t in registry_tools}
    return registry_tools + tuple(t for t in server_tools if t.effective_name not in taken)


def catalog_inputs(session: Session, chat_origin_kind: str = "user",
                   host_config: HostConfig | None = None) -> CatalogInputs:
    config = host_config or HostConfig.current(session.tenant)
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
        allowlist=catalog_allowlist(document, tools) if document else None,
        permission_rules=tuple(PermissionRule(a, "deny") for a in excluded_host_tools(document)) if document else (),
        client_rules=tuple(rule for client in clients for rule in published_rules(client.customizations)),
        session=session,
    )


_SNAPSHOTS = LruCache(1024)  # (tenant id, session id, chat origin kind) -> (key, registry tools, snapshot)


def catalog_for_session(session: Session, chat_origin_kind: str = "user") -> CatalogSnapshot:
    """The snapshot for one model request in a chat of `session` of that origin: the kept one
    while the rows it was made from are unchanged, else a new one."""
    place = (session.tenant_id, session.pk, chat_origin_kind)
    stamp = catalog_stamp(session)  # a tenant's first configuration write changes it too
    # create_session's wording names the agents this process can start (their programs installed).
    key = (stamp, session.provider, json.dumps([session.config, session.working_directories], sort_keys=True,
                                               default=str), tuple(agent.id for agent in startable_agents()))
    kept = _SNAPSHOTS.get(place)
    if kept is not None and kept[0] == key and kept[1] is REGISTRY.tools:
        return kept[2]
    # The stamp was read before the rows: a write landing in between makes this snapshot newer
    # than its key, never older, and the next use builds again.
    tools = REGISTRY.tools
    return _SNAPSHOTS.put(place, (key, tools, assemble_catalog(catalog_inputs(session, chat_origin_kind))))[2]


def catalog_for_chat(chat: Chat) -> CatalogSnapshot:
    """The snapshot for one model request in `chat`."""
    return catalog_for_session(chat.session, chat.origin_kind)
