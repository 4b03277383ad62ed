"""Every change this app makes: one `do_*` function each."""
from django.db import transaction

from kernel.refusals import Refused
from tools_app.models import HostConfig

from .models import SessionMcpServers, StdioServer
from .servers import usable_servers


@transaction.atomic
def do_capture_mcp_servers(session):
    """At a session's start, keep the tenant's usable mcpServers as they are now: a later change
    of the tenant's map reaches the next session, never this one."""
    servers = usable_servers(HostConfig.current(session.tenant).mcp_servers, f"tenant {session.tenant.slug}")
    row, _ = SessionMcpServers.objects.get_or_create(session=session, defaults={"servers": servers})
    return row


@transaction.atomic
def do_record_server_tools(session_id, listed):
    """What listing each server taught the host: {name: {"tools": [...]} | {"error": "..."}}."""
    row = SessionMcpServers.objects.select_for_update().filter(session_id=session_id).first()
    if row is None:
        raise Refused(f"Session ahp-session:/{session_id} has no MCP servers recorded.", "not_found")
    row.server_tools = {**row.server_tools, **listed}
    row.save(update_fields=["server_tools", "modified"])
    return row


@transaction.atomic
def do_record_client_servers(session_id, client_id, servers):
    """The http servers client `client_id`'s plugins declare for this session (empty: none)."""
    row, _ = SessionMcpServers.objects.select_for_update().get_or_create(session_id=session_id)
    row.client_servers = {**(row.client_servers or {}), client_id: servers}
    row.save(update_fields=["client_servers", "modified"])
    return row


@transaction.atomic
def do_save_stdio_server(server: StdioServer) -> StdioServer:
    """Save an operator's stdio server (new or edited): the next session that names it runs it so."""
    server.full_clean()
    server.save()
    return server


@transaction.atomic
def do_delete_stdio_server(server: StdioServer) -> None:
    """Remove an operator's stdio server: tenants' entries naming it are left out from the next session."""
    StdioServer.objects.filter(pk=server.pk).delete()
