"""GET/PATCH/PUT /api/v1/config with the tenant's bearer tokens, and the OpenAPI schema."""
import pytest
from rest_framework.test import APIClient

from tools_app.catalog.host_tools import PLUGINS
from tools_app.catalog.registry import Tool
from tools_app.families.computers.tools import COMPUTER_TOOLS
from tools_app.families.mcp_servers.servers import revealed
from tools_app.models import HostConfig, StdioServer

from ..ahp.mcp.helpers import tools_endpoint, with_mcp
from ..ahp.protocol.harness import AhpClient


def api(token):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


def test_it_reads_the_callers_tenant_config_under_wire_keys(acme, globex):
    HostConfig.objects.create(tenant=globex.tenant, advanced_tools=True)
    response = api(acme.tokens["admin"]).get("/api/v1/config")
    assert response.status_code == 200
    assert response.json() == {
        "sessionTools": True, "sessionToolsProviders": [], "advancedTools": False, "mcpServers": None,
        "clientToolTimeoutMs": 600000, "clientToolCallDisconnectTimeoutMs": 30000,
        "agentOrchestrationLimits": "on", "agentOrchestrationLimitsScope": "tree", "chatMoves.enabled": True,
            "agentConnections": None, "plugins": None}
    assert api(globex.tokens["root"]).get("/api/v1/config").json()["advancedTools"] is True


def test_it_refuses_reading_without_config_settings(acme):
    response = api(acme.tokens["guest"]).get("/api/v1/config")
    assert (response.status_code, response.json()) == (403, {"error": "acme-guest may not config:settings here"})


def test_it_refuses_a_call_without_a_token(db):
    assert APIClient().get("/api/v1/config").status_code == 401


def test_patch_sets_only_the_keys_given(acme):
    response = api(acme.tokens["admin"]).patch("/api/v1/config", {"advancedTools": True}, format="json")
    assert response.status_code == 200 and response.json()["advancedTools"] is True
    api(acme.tokens["root"]).patch("/api/v1/config", {"clientToolTimeoutMs": 5000}, format="json")
    config = HostConfig.for_tenant(acme.tenant)
    assert (config.advanced_tools, config.client_tool_timeout_ms) == (True, 5000)


def test_put_returns_omitted_keys_to_their_defaults(acme):
    api(acme.tokens["root"]).patch("/api/v1/config", {"advancedTools": True}, format="json")
    response = api(acme.tokens["root"]).put("/api/v1/config", {"sessionTools": False}, format="json")
    assert (response.json()["advancedTools"], response.json()["sessionTools"]) == (False, False)


def test_patch_refuses_without_config_change(acme):
    response = api(acme.tokens["member"]).patch("/api/v1/config", {"advancedTools": True}, format="json")
    assert (response.status_code, response.json()) == (403, {"error": "acme-member may not config:change here"})
    assert HostConfig.for_tenant(acme.tenant).advanced_tools is False


def test_patch_refuses_an_unknown_key_and_a_bad_value(acme):
    client = api(acme.tokens["root"])
    response = client.patch("/api/v1/config", {"warpDrive": True}, format="json")
    assert (response.status_code, response.json()) == (400, {"error": "Unknown configuration key warpDrive."})
    response = client.patch("/api/v1/config", {"agentOrchestrationLimits": "maybe"}, format="json")
    assert response.json() == {"error": "agentOrchestrationLimits must be one of 'on', 'off'."}


# Bad mcpServers entries as an admin row and as REST sends them, the field the row marks, and the
# one sentence every door refuses them with.
BAD_SERVERS = [
    ({"name": "docs", "type": "http", "url": "not a url at all"}, {"type": "http", "url": "not a url at all"},
     "url", "mcpServers.docs.url must be an http or https URL."),
    ({"name": "docs", "type": "carrier-pigeon"}, {"type": "carrier-pigeon"},
     "type", 'mcpServers.docs.type must be "stdio" or "http".'),
    ({"name": "docs", "server": "nope"}, {"type": "stdio", "server": "nope"},
     "server", "mcpServers.docs.server must name one of the operator's stdio servers."),
    ({"name": "docs", "type": "http", "url": "ftp://a"}, {"type": "http", "url": "ftp://a"},
     "url", "mcpServers.docs.url must be an http or https URL."),
]


def too_large(sentence):
    """The cap's refusal for the size `sentence` names, which must be over the cap."""
    size = int(sentence.removeprefix("The configuration would take ").split(" ")[0])
    assert size > 256 * 1024
    return f"The configuration would take {size} bytes; a tenant's configuration holds at most 262144."


@pytest.mark.parametrize("entry, sentence", [(entry, sentence) for _, entry, _, sentence in BAD_SERVERS])
def test_patch_refuses_a_bad_mcp_server_with_the_sentence_the_admin_shows(acme, entry, sentence):
    StdioServer.objects.create(name="tiny", command="/usr/bin/true")  # a server exists; "nope" is not it
    response = api(acme.tokens["root"]).patch("/api/v1/config", {"mcpServers": {"docs": entry}}, format="json")
    assert (response.status_code, response.json()) == (400, {"error": sentence})
    assert HostConfig.for_tenant(acme.tenant).mcp_servers is None


def test_a_header_value_is_measured_as_stored_not_as_shown(acme):
    """2.4 MB shows as "<set>": the cap counts what the row would hold."""
    header = {"type": "http", "url": "https://mcp.example/", "headers": {"Authorization": "x" * 2_400_000}}
    response = api(acme.tokens["root"]).patch("/api/v1/config", {"mcpServers": {"docs": header}}, format="json")
    assert response.status_code == 400 and response.json()["error"] == too_large(response.json()["error"])
    assert HostConfig.for_tenant(acme.tenant).mcp_servers is None


def test_the_socket_refuses_a_bad_mcp_server_with_the_same_sentence(acme, host):
    with AhpClient(host.port, acme.tokens["root"], "operator") as operator:
        operator.subscribe("ahp-root://")
        operator.dispatch("ahp-root://", {"type": "root/configChanged",
                                          "config": {"mcpServers": {"docs": {"type": "http", "url": "ftp://a"}}}})
        rejected = operator.action("root/configChanged", rejected=True)
    assert rejected["rejectionReason"] == "mcpServers.docs.url must be an http or https URL."
    assert HostConfig.for_tenant(acme.tenant).mcp_servers is None


def test_patch_keeps_mcp_credentials_sent_back_masked(acme):
    client = api(acme.tokens["root"])
    client.patch("/api/v1/config", {"mcpServers": {"git": {"type": "http", "url": "https://mcp.example/",
                                                            "headers": {"Authorization": "x"}}}}, format="json")
    shown = client.get("/api/v1/config").json()["mcpServers"]
    assert shown == {"git": {"type": "http", "url": "https://mcp.example/", "headers": {"Authorization": "<set>"}}}
    client.patch("/api/v1/config", {"mcpServers": shown}, format="json")
    assert revealed(HostConfig.for_tenant(acme.tenant).mcp_servers["git"])["headers"] == {"Authorization": "x"}


def test_a_patch_reaches_running_sessions_as_server_tools_changed(acme, host):
    PLUGINS.set_tools([Tool("deploy", description="Deploy", advanced_permission=True)])
    try:
        with AhpClient(host.port, acme.tokens["member"]) as client:
            session = client.create_session()
            before = [t["name"] for t in client.subscribe(session)["serverTools"]]
            assert "deploy" not in before
            api(acme.tokens["root"]).patch("/api/v1/config", {"advancedTools": True}, format="json")
            assert [t["name"] for t in client.action("session/serverToolsChanged")["action"]["tools"]] == [*before, "deploy", *(t.name for t in COMPUTER_TOOLS)]
    finally:
        PLUGINS.set_tools([])


def test_the_openapi_schema_describes_the_config_endpoint(db):
    response = APIClient().get("/api/v1/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    schema = response.json()
    assert set(schema["paths"]["/api/v1/config"]) >= {"get", "patch", "put"}
    assert set(schema["components"]["schemas"]["HostConfig"]["properties"]) >= {"advancedTools", "chatMoves.enabled"}
    assert schema["components"]["securitySchemes"]["bearerToken"] == {
        "type": "http", "scheme": "bearer",
        "description": "A connection token of the tenant (minttoken, or the admin's API tokens page)."}


def test_the_browsable_docs_load_their_assets_from_this_host(db):
    page = APIClient().get("/api/v1/docs/").content.decode()
    assert "/api/v1/schema/" in page and "swagger-ui" in page
    assert "cdn" not in page.lower()


def test_the_openapi_schema_has_every_key_with_its_help_text(db):
    from tools_app.config import KEYS

    schema = APIClient().get("/api/v1/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    properties = schema["components"]["schemas"]["HostConfig"]["properties"]
    assert list(properties) == [key.wire for key in KEYS]
    assert properties["clientToolTimeoutMs"]["description"] == (
        "How long a client may take to run a tool before the call fails; 0 waits for ever. Default 600000.")


def test_a_plugin_set_without_host_tools_loses_them_live_and_on_its_mcp_server(acme, host):
    """plugins.<provider>.hostTools false: the provider's sessions take none of the host's own tools,
    neither in serverTools nor on the session's MCP server (the one server they reach them by)."""
    with AhpClient(host.port, acme.tokens["member"]) as client:
        session = client.create_session()
        before = [t["name"] for t in client.subscribe(session)["serverTools"]]
        assert "list_sessions" in before
        answer = api(acme.tokens["root"]).patch("/api/v1/config", {"plugins": {"echo": {"hostTools": False}}},
                                                format="json")
        assert answer.json()["plugins"] == {"echo": {"hostTools": False}}
        assert client.action("session/serverToolsChanged")["action"]["tools"] == []
        endpoint = tools_endpoint(host.port, acme.tokens["member"], session).json()
        listed = with_mcp(endpoint["url"], endpoint["token"], lambda s: s.list_tools())
        assert not {t.name for t in listed.tools} & set(before)
        api(acme.tokens["root"]).patch("/api/v1/config", {"plugins": {"echo": {"hostTools": True}}}, format="json")
        assert [t["name"] for t in client.action("session/serverToolsChanged")["action"]["tools"]] == before


def test_a_private_endpoint_saves_with_the_admins_warning_that_it_needs_the_allow_list(acme, settings):
    settings.AHP_OUTBOUND_ALLOW = ""
    hint = ("So sessions cannot reach it until it is on the outbound allow-list (AHP_OUTBOUND_ALLOW, or the "
            "superuser's outbound allow-list in the admin).")
    response = api(acme.tokens["root"]).patch("/api/v1/config", {
        "mcpServers": {"docs": {"type": "http", "url": "http://10.1.2.3:8080/mcp"}},
        "agentConnections": {"claude": {"baseUrl": "http://127.0.0.1:9/", "apiKey": "k"}}}, format="json")
    assert response.status_code == 200
    assert response.json()["warnings"] == [
        "mcpServers.docs.url (http://10.1.2.3:8080/mcp): The host does not connect to 10.1.2.3:8080: it is a "
        f"private address and not allow-listed. {hint}",
        "agentConnections.claude.baseUrl (http://127.0.0.1:9/): The host does not connect to 127.0.0.1:9: it is a "
        f"private address and not allow-listed. {hint}"]
    assert HostConfig.for_tenant(acme.tenant).mcp_servers["docs"]["url"] == "http://10.1.2.3:8080/mcp"
    settings.AHP_OUTBOUND_ALLOW = "10.1.2.3,127.0.0.1"
    response = api(acme.tokens["root"]).put("/api/v1/config", {
        "mcpServers": {"docs": {"type": "http", "url": "http://10.1.2.3:8080/mcp"}},
        "agentConnections": {"claude": {"baseUrl": "https://93.184.216.34/", "apiKey": "k"}}}, format="json")
    assert response.json()["warnings"] == []
    assert "warnings" not in api(acme.tokens["root"]).get("/api/v1/config").json()
