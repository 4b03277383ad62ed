"""HostConfig in the admin: every key explained, bad values refused on their field,
credentials masked and kept, and a save applied live to running sessions."""

import pytest

from tools_app.catalog.host_tools import PLUGINS
from tools_app.catalog.registry import Tool
from tools_app.config import wire_values
from tools_app.families.computers.tools import COMPUTER_TOOLS
from tools_app.families.mcp_servers.servers import revealed
from tools_app.models import HostConfig, StdioServer

from ..ahp.protocol.harness import AhpClient
from .conftest import change_url, host_config_form, server_rows
from .test_config_rest import BAD_SERVERS, too_large


@pytest.fixture
def stdio_server(db):
    """The operator's stdio server `tiny`, which tenants pick by name."""
    return StdioServer.objects.create(name="tiny", command="/usr/bin/true")

WIRE_KEYS = ("sessionTools", "sessionToolsProviders", "advancedTools", "mcpServers", "clientToolTimeoutMs",
             "clientToolCallDisconnectTimeoutMs", "agentOrchestrationLimits", "agentOrchestrationLimitsScope",
             "chatMoves.enabled", "plugins")


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
    assert HostConfig.for_tenant(acme.tenant).client_tool_timeout_ms == 600000


def row_errors(response, row):
    return response.context["adminform"].form["mcpServers"].value().forms[row].errors


def test_a_bad_mcp_server_row_is_refused_on_its_own_field(acme, tenant_admin, stdio_server):
    post = lambda *rows: tenant_admin.post(change_url(acme.tenant), host_config_form(acme.tenant, server_rows(*rows)))
    response = post({"name": "docs", "type": "http", "url": "ftp://docs.example/"})
    assert response.context["adminform"].form.errors["mcpServers"] == ["Correct the rows marked below."]
    assert row_errors(response, 0) == {"url": ["mcpServers.docs.url must be an http or https URL."]}
    response = post({"name": "has space", "server": "tiny"}, {"name": "git"})
    assert row_errors(response, 0) == {"name": ["mcpServers: a server name is 1 to 64 letters, digits, _ and -."]}
    assert row_errors(response, 1) == {"server": ["mcpServers.git.server must name one of the operator's stdio servers."]}
    response = post({"name": "git", "server": "nope"}, {"name": "git", "server": "tiny", "headers": "Authorization"})
    assert row_errors(response, 0) == {"server": ["mcpServers.git.server must name one of the operator's stdio servers."]}
    assert row_errors(response, 1) == {"headers": ["Write one \"Name: value\" a line; 'Authorization' is not."]}
    assert "Correct the rows marked below." in response.content.decode()
    assert HostConfig.for_tenant(acme.tenant).mcp_servers is None


@pytest.mark.parametrize("row, field, sentence", [(row, field, sentence) for row, _, field, sentence in BAD_SERVERS])
def test_the_admin_refuses_a_bad_server_row_with_the_sentence_rest_gives(acme, tenant_admin, stdio_server, row, field,
                                                                           sentence):
    response = tenant_admin.post(change_url(acme.tenant), host_config_form(acme.tenant, server_rows(row)))
    assert row_errors(response, 0) == {field: [sentence]}
    assert sentence in response.content.decode().replace("&quot;", '"').replace("&#x27;", "'")
    assert HostConfig.for_tenant(acme.tenant).mcp_servers is None


def test_the_admin_measures_a_configuration_as_stored_not_as_shown(acme, tenant_admin):
    """A header value shows as "<set>" (5 bytes); it is stored sealed, and that is what the cap counts."""
    row = {"name": "docs", "type": "http", "url": "https://mcp.example/", "headers": f"Authorization: {'x' * 300_000}"}
    response = tenant_admin.post(change_url(acme.tenant), host_config_form(acme.tenant, server_rows(row)))
    [sentence] = response.context["adminform"].form.non_field_errors()
    assert sentence == too_large(sentence)
    assert HostConfig.for_tenant(acme.tenant).mcp_servers is None


def test_mcp_server_rows_save_as_the_wire_shape(acme, tenant_admin, stdio_server):
    form = host_config_form(acme.tenant, server_rows(
        {"name": "tiny", "server": "tiny", "env": "SUFFIX=!"},
        {"name": "docs", "type": "http", "url": "https://docs.example/mcp", "headers": "Authorization: Bearer x"}))
    assert tenant_admin.post(change_url(acme.tenant), form).status_code == 302
    config = HostConfig.for_tenant(acme.tenant)
    assert wire_values(config)["mcpServers"] == {
        "tiny": {"type": "stdio", "server": "tiny", "env": {"SUFFIX": "<set>"}},
        "docs": {"type": "http", "url": "https://docs.example/mcp", "headers": {"Authorization": "<set>"}}}
    form = host_config_form(acme.tenant)
    docs_row = next(k for k, v in form.items() if k.endswith("-name") and v == "docs").split("-")[1]
    form[f"mcpServers-{docs_row}-DELETE"] = "on"  # PostgreSQL's jsonb keeps keys in its own order
    assert tenant_admin.post(change_url(acme.tenant), form).status_code == 302
    config.refresh_from_db()
    assert list(config.mcp_servers) == ["tiny"] and revealed(config.mcp_servers["tiny"])["env"] == {"SUFFIX": "!"}


def test_session_tools_providers_are_ticked_from_the_known_providers(acme, tenant_admin):
    page = tenant_admin.get(change_url(acme.tenant)).content.decode()
    for provider in ("echo", "acp", "github-copilot"):
        assert f'name="sessionToolsProviders" value="{provider}"' in page
    response = tenant_admin.post(change_url(acme.tenant), host_config_form(acme.tenant, sessionToolsProviders=["warp"]))
    assert response.context["adminform"].form.errors["sessionToolsProviders"] == [
        "Select a valid choice. warp is not one of the available choices."]


def test_it_saves_values_through_the_config_checks(acme, tenant_admin):
    form = host_config_form(acme.tenant, clientToolTimeoutMs="5000", sessionToolsProviders=["echo", "acp"],
                            agentOrchestrationLimitsScope="session", chatMovesEnabled=False)
    assert tenant_admin.post(change_url(acme.tenant), form).status_code == 302
    config = HostConfig.for_tenant(acme.tenant)
    assert (config.client_tool_timeout_ms, config.session_tools_providers) == (5000, ["echo", "acp"])
    assert (config.agent_orchestration_limits_scope, config.chat_moves_enabled) == ("session", False)


def test_plugins_ticked_save_as_taking_none_of_the_hosts_tools(acme, tenant_admin):
    page = tenant_admin.get(change_url(acme.tenant)).content.decode()
    assert 'name="plugins" value="claude"' in page
    assert tenant_admin.post(change_url(acme.tenant), host_config_form(acme.tenant, plugins=["claude"])).status_code == 302
    assert HostConfig.for_tenant(acme.tenant).plugins == {"claude": {"hostTools": False}}
    page = tenant_admin.get(change_url(acme.tenant)).content.decode()
    assert 'name="plugins" value="claude" id="id_plugins_3" checked' in page
    assert tenant_admin.post(change_url(acme.tenant), host_config_form(acme.tenant)).status_code == 302
    assert HostConfig.for_tenant(acme.tenant).plugins == {"claude": {"hostTools": False}}  # kept when unchanged


def test_it_shows_mcp_credentials_as_set_and_keeps_them_when_unchanged(acme, tenant_admin, stdio_server):
    config = HostConfig.for_tenant(acme.tenant)
    config.mcp_servers = {"git": {"type": "stdio", "server": "tiny", "env": {"GIT_TOKEN": "s3cret"}}}
    config.save()
    page = tenant_admin.get(change_url(acme.tenant)).content.decode()
    assert "s3cret" not in page and "GIT_TOKEN=&lt;set&gt;" in page
    form = host_config_form(acme.tenant, advancedTools=True)
    assert form["mcpServers-0-env"] == "GIT_TOKEN=<set>"
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


@pytest.mark.e2e  # runs the server in bubblewrap
def test_check_lists_a_saved_servers_tools_or_says_why_not(acme, tenant_admin, tiny_stdio_server):
    config = HostConfig.for_tenant(acme.tenant)
    config.mcp_servers = {"tiny": {"type": "stdio", "server": "tiny"},
                          "docs": {"type": "http", "url": "http://10.1.2.3/mcp"}}
    config.save()
    page = tenant_admin.get(change_url(acme.tenant)).content.decode()
    assert 'href="check-mcp/tiny/"' in page and 'href="check-mcp/docs/"' in page
    checked = tenant_admin.get(f"{change_url(acme.tenant)}check-mcp/tiny/").content.decode()
    assert "<td>shout</td><td>Upper-case the text.</td>" in checked
    checked = tenant_admin.get(f"{change_url(acme.tenant)}check-mcp/docs/").content.decode()
    assert 'id="check-error">Could not list its tools: ' in checked and "10.1.2.3" in checked
    assert tenant_admin.get(f"{change_url(acme.tenant)}check-mcp/nope/").status_code == 404
