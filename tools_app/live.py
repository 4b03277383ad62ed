"""Keeping SessionState.serverTools true while sessions run: whenever what a session is offered
changes, its subscribers get `session/serverToolsChanged` with the whole new list."""
import logging

from sessions_app.actions import do_set_server_tools
from sessions_app.channels import parse
from sessions_app.models import ClientConnection, Session

from .catalog.catalog import assemble_catalog
from .catalog.loader import catalog_inputs
from .models import HostConfig

logger = logging.getLogger(__name__)


def server_tools_for(session, host_config=None):
    return list(assemble_catalog(catalog_inputs(session, "user", host_config)).server_tools)


def refresh_server_tools(sessions):
    """Recompute serverTools for `sessions`; publish where the list changed. Answers how many changed."""
    changed = 0
    configs = {}
    for session in sessions:
        config = configs.get(session.tenant_id) or configs.setdefault(session.tenant_id, HostConfig.current(session.tenant))
        tools = server_tools_for(session, config)
        if tools == session.server_tools:
            continue
        do_set_server_tools(session, tools)
        changed += 1
    return changed


def live_sessions(tenant=None):
    """Sessions some connection is subscribed to: the ones whose subscribers must hear a change."""
    connections = ClientConnection.objects.all() if tenant is None else ClientConnection.objects.for_tenant(tenant)
    ids = {key for subs in connections.values_list("subscriptions", flat=True)
           for kind, key in map(parse, subs) if kind == "session"}
    return Session.objects.filter(id__in=ids).select_related("tenant")


def refresh_live_sessions(tenant=None):
    return refresh_server_tools(live_sessions(tenant))
