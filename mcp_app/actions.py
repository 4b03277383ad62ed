"""Every change this app makes: one `do_*` function each."""
from django.db import IntegrityError, transaction

from kernel.refusals import Refused
from sessions_app.actions import require
from tools_app.models import HostConfig

from .models import SessionMcpServers, ToolsEndpoint
from .servers import usable_servers


@transaction.atomic
def do_open_tools_endpoint(principal, session, api_token=None):
    """The session's tools endpoint token for `api_token` (acting as its person), or, without
    one, for the agent the host starts (acting as the person whose turn it answers). Opened on
    first use; asking again answers the same token."""
    require(principal, "session:write", session)
    rows = ToolsEndpoint.objects.select_for_update().filter(session=session)
    endpoint = rows.filter(api_token=api_token) if api_token is not None else rows.filter(api_token__isnull=True)
    existing = endpoint.first()
    if existing is not None:
        return existing
    try:
        with transaction.atomic():
            return ToolsEndpoint.open(session, api_token=api_token)
    except IntegrityError:  # the same holder asked at the same moment: theirs is the one
        return endpoint.first()


@transaction.atomic
def do_capture_mcp_servers(session):
    """At a session's start, keep the tenant's usable mcpServers as they are now: a later change
    of the tenant's map reaches the next session, never this one."""
    servers = usable_servers(HostConfig.for_tenant(session.tenant).mcp_servers, f"tenant {session.tenant.slug}")
    row, _ = SessionMcpServers.objects.get_or_create(session=session, defaults={"servers": servers})
    return row


@transaction.atomic
def do_record_server_tools(session_id, listed):
    """What listing each server taught the host: {name: {"tools": [...]} | {"error": "..."}}."""
    row = SessionMcpServers.objects.select_for_update().filter(session_id=session_id).first()
    if row is None:
        raise Refused(f"Session ahp-session:/{session_id} has no MCP servers recorded.", "not_found")
    row.server_tools = {**row.server_tools, **listed}
    row.save(update_fields=["server_tools"])
    return row


@transaction.atomic
def do_record_client_servers(session_id, client_id, servers):
    """The http servers client `client_id`'s plugins declare for this session (empty: none)."""
    row, _ = SessionMcpServers.objects.select_for_update().get_or_create(session_id=session_id)
    row.client_servers = {**(row.client_servers or {}), client_id: servers}
    row.save(update_fields=["client_servers"])
    return row
