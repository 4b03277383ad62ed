import json

from django.contrib import admin
from django.utils.html import format_html_join

from grants.admin import TenantScopedAdmin
from kernel.admin_deletes import DeletesThroughActions
from sandbox.admin import SuperuserOnlyAdmin
from tools_app.credentials import masked_mcp_servers

from .actions import do_delete_stdio_server, do_save_stdio_server
from .models import SessionMcpServers, StdioServer


@admin.register(SessionMcpServers)
class SessionMcpServersAdmin(TenantScopedAdmin):
    """What each session was given and what the host could list of it; credentials read <set>."""

    list_display = ("session", "server_names", "created")
    fields = ("session", "servers_shown", "tools_listed", "created")
    readonly_fields = fields

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    @admin.display(description="servers")
    def server_names(self, obj):
        return ", ".join(sorted(obj.servers or {})) or "none"

    @admin.display(description="servers (credentials read <set>)")
    def servers_shown(self, obj):
        return json.dumps(masked_mcp_servers(obj.servers), indent=2) if obj.servers else "none"

    @admin.display(description="tools listed")
    def tools_listed(self, obj):
        rows = []
        for name, listed in sorted((obj.server_tools or {}).items()):
            if "error" in listed:
                rows.append((name, f"could not be listed: {listed['error']}"))
            else:
                rows.append((name, ", ".join(t["name"] for t in listed.get("tools", ())) or "no tools"))
        return format_html_join("\n", "<div><b>{}</b>: {}</div>", rows) or "not listed yet"


@admin.register(StdioServer)
class StdioServerAdmin(DeletesThroughActions, SuperuserOnlyAdmin):
    """The operator's stdio MCP servers: a tenant's mcpServers picks one by name ("stdio server")."""

    list_display = ("name", "description", "command")
    fields = ("name", "description", "command", "args", "env", "read_only_paths")
    search_fields = ("name", "command")

    def save_model(self, request, obj, form, change):
        do_save_stdio_server(obj)

    def delete_row(self, server):
        do_delete_stdio_server(server)
