"""agentConnections in the HostConfig admin: one row per provider, a bad value refused on its own
field with REST's sentence, credentials shown `<set>` and kept by a save that did not retype them."""
from sandbox.sealing import unseal
from tools_app.agent_connections import OWN_KEY_NEEDED
from tools_app.config import wire_values
from tools_app.models import HostConfig

from .conftest import change_url, connection_rows, host_config_form


def post(client, tenant, *rows, initial=0):
    return client.post(change_url(tenant), host_config_form(tenant, agent_rows=connection_rows(*rows, initial=initial)))


def row_errors(response, row):
    rows = response.context["adminform"].form["agentConnections"].value()
    rows.is_valid()  # as the page does: the rows' own checks, then the checks across rows
    return rows.forms[row].errors


def test_a_claude_row_saves_the_wire_shape(acme, tenant_admin):
    response = post(tenant_admin, acme.tenant, {"provider": "claude", "baseUrl": "https://llm.example/v1",
                                                "apiKey": "sk-1", "model": "sonnet"})
    assert response.status_code == 302
    config = HostConfig.for_tenant(acme.tenant)
    assert wire_values(config)["agentConnections"] == {
        "claude": {"baseUrl": "https://llm.example/v1", "apiKey": "<set>", "model": "sonnet"}}
    assert unseal(config.agent_connections["claude"]["apiKey"]) == "sk-1"


def test_a_bad_value_is_refused_on_its_own_field_with_the_rest_sentence(acme, tenant_admin):
    response = post(tenant_admin, acme.tenant, {"provider": "claude", "baseUrl": "ftp://llm.example/"},
                    {"provider": "claude", "type": "openai"})
    assert response.context["adminform"].form.errors["agentConnections"] == ["Correct the rows marked below."]
    assert row_errors(response, 0) == {"baseUrl": ["agentConnections.claude.baseUrl must be an http or https URL."]}
    assert row_errors(response, 1) == {
        "type": ["agentConnections.claude.type: unknown field; use one of baseUrl, apiKey, model, permissions."],
        "provider": ["Another row is already for claude."]}
    page = response.content.decode()
    assert "agentConnections.claude.baseUrl must be an http or https URL." in page
    assert "Another row is already for claude." in page
    assert HostConfig.for_tenant(acme.tenant).agent_connections is None


def test_a_tenant_endpoint_without_its_own_key_is_refused_with_the_rest_sentence(acme, tenant_admin, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-host-wide-secret")
    response = post(tenant_admin, acme.tenant, {"provider": "claude", "baseUrl": "https://llm.example/v1"})
    assert row_errors(response, 0) == {"apiKey": [OWN_KEY_NEEDED]}
    assert HostConfig.for_tenant(acme.tenant).agent_connections is None
    assert post(tenant_admin, acme.tenant, {"provider": "claude", "baseUrl": "https://llm.example/v1",
                                            "apiKey": "sk-1"}).status_code == 302


def test_an_api_key_reads_set_and_is_kept_by_a_save_that_did_not_retype_it(acme, tenant_admin, monkeypatch):
    monkeypatch.setenv("AHP_ACP_AGENTS", '{"echo": "echo-agent"}')
    assert post(tenant_admin, acme.tenant, {"provider": "github-copilot", "type": "openai", "wireApi": "responses",
                                            "apiKey": "sk-2", "githubToken": "ghp-3", "permissions": "approve-all"},
                {"provider": "acp", "agent": "echo"}).status_code == 302
    page = tenant_admin.get(change_url(acme.tenant)).content.decode()
    assert 'value="&lt;set&gt;"' in page and "sk-2" not in page and "ghp-3" not in page
    # The page posted back as shown, with only the model changed: the credentials keep their values.
    form = host_config_form(acme.tenant)
    copilot_row = next(k for k, v in form.items() if k.endswith("-provider") and v == "github-copilot").split("-")[1]
    form[f"agentConnections-{copilot_row}-model"] = "gpt-5"
    assert tenant_admin.post(change_url(acme.tenant), form).status_code == 302
    config = HostConfig.for_tenant(acme.tenant)
    assert wire_values(config)["agentConnections"] == {
        "github-copilot": {"type": "openai", "wireApi": "responses", "apiKey": "<set>", "githubToken": "<set>",
                           "permissions": "approve-all", "model": "gpt-5"},
        "acp": {"agent": "echo"}}
    copilot = config.agent_connections["github-copilot"]
    assert (unseal(copilot["apiKey"]), unseal(copilot["githubToken"])) == ("sk-2", "ghp-3")


def test_an_acp_agent_the_operator_no_longer_defines_stays_listed_and_kept(acme, tenant_admin, monkeypatch):
    monkeypatch.setenv("AHP_ACP_AGENTS", '{"echo": "echo-agent"}')
    config = HostConfig.for_tenant(acme.tenant)
    config.agent_connections = {"acp": {"agent": "gone"}}
    config.save()
    page = tenant_admin.get(change_url(acme.tenant)).content.decode()
    assert '<option value="gone" selected>gone (not on this host)</option>' in page
    assert '<option value="echo">echo</option>' in page
    form = host_config_form(acme.tenant, advancedTools=True)
    assert tenant_admin.post(change_url(acme.tenant), form).status_code == 302
    config.refresh_from_db()
    assert config.agent_connections == {"acp": {"agent": "gone"}} and config.advanced_tools is True
