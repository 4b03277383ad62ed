"""HostConfig in the admin: every key explained, bad values refused on their field,
credentials masked and kept, and a save applied live to running sessions."""
import pytest

from tools_app.catalog.host_tools import PLUGINS
from tools_app.models import HostConfig
from tools_app.catalog.registry import Tool
from tools_app.families.computers.tools import COMPUTER_TOOLS

from ..ahp.protocol.harness import AhpClient
from .conftest import change_url, host_config_form

WIRE_KEYS = ("sessionTools", "sessionToolsProviders", "advancedTools", "mcpServers", "clientToolTimeoutMs",
             "clientToolCallDisconnectTimeoutMs", "agentOrchestrationLimits", "agentOrchestrationLimitsScope",
             "chatMoves.enabled")


def test_it_shows_every_key_with_its_help_text(acme, tenant_admin):
    page = tenant_admin.get(change_url(acme.tenant)).content.decode()
    for key in WIRE_KEYS:
        assert f"({key})" in page
    assert "How long a client may take to run a tool before the call fails; 0 waits for ever." in page
    assert "tree: counts are kept per session tree; session: per session." in page


def test_it_refuses_a_bad_value_with_a_message_naming_the_field(acme, tenant_admin):
    response = tenant_admin.post(change_url(acme.tenant), host_config_form(acme.tenant, clientToolTimeoutMs="-5"))
    assert response.status_code == 200
    assert response.context["adminform"].form.errors["clientToolTimeoutMs"] == [
        "clientToolTimeoutMs must be a whole number of milliseconds, 0 or more."]
    response = tenant_admin.post(change_url(acme.tenant), host_config_form(acme.tenant, mcpServers='["not", "a map"]'))
    assert response.context["adminform"].form.errors["mcpServers"] == [
        "mcpServers must be an object mapping server names to server entries."]
    assert HostConfig.for_tenant(acme.tenant).client_tool_timeout_ms == 600000


def test_it_saves_values_through_the_config_checks(acme, tenant_admin):
    form = host_config_form(acme.tenant, clientToolTimeoutMs="5000", sessionToolsProviders="echo, copilot",
                            agentOrchestrationLimitsScope="session", chatMovesEnabled=False)
    assert tenant_admin.post(change_url(acme.tenant), form).status_code == 302
    config = HostConfig.for_tenant(acme.tenant)
    assert (config.client_tool_timeout_ms, config.session_tools_providers) == (5000, ["echo", "copilot"])
    assert (config.agent_orchestration_limits_scope, config.chat_moves_enabled) == ("session", False)


def test_it_shows_mcp_credentials_as_set_and_keeps_them_when_unchanged(acme, tenant_admin):
    config = HostConfig.for_tenant(acme.tenant)
    config.mcp_servers = {"git": {"type": "stdio", "server": "git", "env": {"GIT_TOKEN": "s3cret"}}}
    config.save()
    page = tenant_admin.get(change_url(acme.tenant)).content.decode()
    assert "s3cret" not in page and "&lt;set&gt;" in page
    form = host_config_form(acme.tenant, advancedTools=True)
    assert '"<set>"' in form["mcpServers"]
    assert tenant_admin.post(change_url(acme.tenant), form).status_code == 302
    config.refresh_from_db()
    assert config.mcp_servers["git"]["env"] == {"GIT_TOKEN": "s3cret"} and config.advanced_tools is True


def test_a_tenant_admin_cannot_open_another_tenants_config(acme, globex, tenant_admin):
    response = tenant_admin.get(change_url(globex.tenant))
    assert response.status_code == 302
    assert tenant_admin.post(change_url(globex.tenant), host_config_form(globex.tenant, advancedTools=True)
                           ).status_code == 302
    assert HostConfig.for_tenant(globex.tenant).advanced_tools is False


@pytest.fixture
def advanced_plugin_tool():
    PLUGINS.set_tools([Tool("deploy", description="Deploy the workspace", advanced_permission=True)])
    yield
    PLUGINS.set_tools([])


def test_an_admin_save_reaches_running_sessions_as_server_tools_changed(acme, host, advanced_plugin_tool,
                                                                        tenant_admin):
    with AhpClient(host.port, acme.tokens["member"]) as client:
        session = client.create_session()
        before = [t["name"] for t in client.subscribe(session)["serverTools"]]
        assert "deploy" not in before
        response = tenant_admin.post(change_url(acme.tenant), host_config_form(acme.tenant, advancedTools=True))
        assert response.status_code == 302
        tools = client.action("session/serverToolsChanged")["action"]["tools"]
        assert [t["name"] for t in tools] == [*before, "deploy", *(t.name for t in COMPUTER_TOOLS)]
