"""The admin pages an operator meets: stdio servers, memberships, tokens, the allow-list, agent
definitions, and the pages that offer no Add."""
import pytest
from django.contrib.auth import get_user_model
from django.contrib.messages import get_messages
from django.test import Client
from rest_framework.test import APIClient

from grants.actions import do_mint_page_token
from grants.admin import NO_PERSON
from grants.models import ApiToken, Membership
from sandbox.models import OutboundAllow
from tools_app.models import AgentDefinition, HostConfig, StdioServer


@pytest.fixture
def superuser(db):
    person = get_user_model().objects.create_superuser("root-operator", password="x")
    client = Client()
    client.force_login(person)
    return client


def flashed(response):
    return [str(m) for m in get_messages(response.wsgi_request)]


def test_a_superuser_defines_a_stdio_server_and_the_host_config_select_offers_it(acme, superuser, tenant_admin):
    response = superuser.post("/admin/tools_app/stdioserver/add/", {
        "name": "git", "description": "git MCP", "command": "/usr/bin/git-mcp", "args": '["--stdio"]',
        "env": "{}", "read_only_paths": '["/opt/git-mcp"]'})
    assert response.status_code == 302
    assert StdioServer.objects.get(name="git").to_entry()["args"] == ["--stdio"]
    page = tenant_admin.get(f"/admin/tools_app/hostconfig/{HostConfig.for_tenant(acme.tenant).pk}/change/")
    assert '<option value="git">git</option>' in page.content.decode()
    assert tenant_admin.get("/admin/tools_app/stdioserver/").status_code == 403


def test_a_stdio_server_with_a_relative_command_or_bad_args_is_refused(superuser, db):
    response = superuser.post("/admin/tools_app/stdioserver/add/", {
        "name": "git", "command": "git-mcp", "args": '"--stdio"', "env": "{}", "read_only_paths": "[]"})
    assert response.context["adminform"].form.errors == {
        "command": ["The command is an absolute path (/usr/local/bin/server)."],
        "args": ['Write the arguments as a JSON list of strings: ["--flag", "value"].'],
    }
    assert not StdioServer.objects.exists()


def test_adding_a_member_flashes_the_role_given(acme, tenant_admin):
    response = tenant_admin.post("/admin/grants/membership/add/",
                                 {"tenant": acme.tenant.pk, "username": "bob", "role": "admin"})
    assert response.status_code == 302
    assert any("bob in acme as admin" in m for m in flashed(response)), flashed(response)


def test_adding_an_existing_member_is_refused_and_keeps_their_role(acme, tenant_admin):
    response = tenant_admin.post("/admin/grants/membership/add/",
                                 {"tenant": acme.tenant.pk, "username": "acme-guest", "role": "admin"})
    assert response.context["adminform"].form.errors["username"] == [
        "acme-guest is already a member of acme, as guest; change their role on their membership's page."]
    assert Membership.objects.get(tenant=acme.tenant, person=acme.guest).role == "guest"


def test_a_token_needs_a_person_or_the_explicit_root_choice(acme, tenant_admin):
    response = tenant_admin.post("/admin/grants/apitoken/add/", {"tenant": acme.tenant.pk, "name": "ci"})
    assert response.context["adminform"].form.errors["person"] == [NO_PERSON]
    assert not ApiToken.objects.filter(name="ci").exists()
    response = tenant_admin.post("/admin/grants/apitoken/add/",
                                 {"tenant": acme.tenant.pk, "name": "ci", "root": "on",
                                  "expires": "2999-01-01T00:00"})
    assert response.status_code == 200
    row = ApiToken.objects.get(tenant=acme.tenant, name="ci")
    assert row.person is None and row.expires.year == 2999


def test_console_page_tokens_are_not_listed(acme, tenant_admin):
    do_mint_page_token(acme.tenant, acme.admin)
    page = tenant_admin.get("/admin/grants/apitoken/").content.decode()
    assert "acme-member" in page
    assert "console-page-" not in page


def test_the_allow_list_refuses_every_address(superuser, db):
    for entry in ("0.0.0.0/0", "::/0"):
        response = superuser.post("/admin/sandbox/outboundallow/add/", {"entry": entry, "note": "all"})
        assert response.context["adminform"].form.errors["entry"] == [
            f"{entry} would allow every address, private ones included; "
            "name the networks the host may reach (10.0.0.0/8, 127.0.0.1/32)."]
    assert not OutboundAllow.objects.exists()


def definition_form(acme, **fields):
    return {"tenant": acme.tenant.pk, "name": "helper", "provider": "echo", "model": "", "instructions": "",
            "tools": "[]", **fields}


def test_an_agent_definition_with_an_unknown_provider_or_server_is_refused(acme, tenant_admin):
    response = tenant_admin.post("/admin/tools_app/agentdefinition/add/", definition_form(acme, provider="clade"))
    assert response.context["adminform"].form.errors["provider"][0].startswith(
        '/provider: No provider "clade" runs on this host; it runs ')
    response = tenant_admin.post("/admin/tools_app/agentdefinition/add/",
                                 definition_form(acme, tools='[{"kind": "mcp", "serverName": "nope"}]'))
    assert response.context["adminform"].form.errors["tools"] == [
        '/tools/0/serverName: Tenant acme has no MCP server "nope" in its mcpServers.']
    assert not AgentDefinition.objects.exists()


def test_the_agent_definition_form_starts_with_an_empty_tools_list_explained_in_words(tenant_admin, acme):
    page = tenant_admin.get("/admin/tools_app/agentdefinition/add/").content.decode()
    assert ">\n[]</textarea>" in page
    assert "empty offers every tool" in page
    assert "schemas/agent_definition.json" not in page


def test_rest_deletes_an_agent_definition_with_config_change(acme):
    row = AgentDefinition(tenant=acme.tenant)
    row.set_document({"name": "helper", "provider": "echo"})
    row.save()
    member, admin = APIClient(), APIClient()
    member.credentials(HTTP_AUTHORIZATION=f"Bearer {acme.tokens['member']}")
    admin.credentials(HTTP_AUTHORIZATION=f"Bearer {acme.tokens['admin']}")
    response = member.delete(f"/api/v1/agent-definitions/{row.pk}")
    assert (response.status_code, response.json()) == (403, {"error": "You need config:change to change agent definitions."})
    assert admin.delete(f"/api/v1/agent-definitions/{row.pk}").status_code == 204
    assert not AgentDefinition.objects.exists()
    assert admin.delete(f"/api/v1/agent-definitions/{row.pk}").status_code == 404


def test_heartbeats_and_a_tenant_admins_host_configs_offer_no_add(acme, tenant_admin, superuser):
    HostConfig.for_tenant(acme.tenant)
    assert superuser.get("/admin/ahp/workerheartbeat/add/").status_code == 403
    assert tenant_admin.get("/admin/tools_app/hostconfig/add/").status_code == 403
    assert "Add host config" not in tenant_admin.get("/admin/tools_app/hostconfig/").content.decode()


def test_saving_a_private_mcp_url_or_base_url_warns_that_it_needs_the_allow_list(acme, tenant_admin):
    from tests.console.conftest import change_url, connection_rows, host_config_form, server_rows

    form = host_config_form(acme.tenant, server_rows({"name": "docs", "type": "http", "url": "http://10.1.2.3:8080/mcp"}),
                            connection_rows({"provider": "claude", "baseUrl": "http://127.0.0.1:9/", "apiKey": "k"}))
    response = tenant_admin.post(change_url(acme.tenant), form)
    assert response.status_code == 302
    hint = ("So sessions cannot reach it until it is on the outbound allow-list (AHP_OUTBOUND_ALLOW, or the "
            "superuser's outbound allow-list in the admin).")
    assert flashed(response)[:2] == [
        "mcpServers.docs.url (http://10.1.2.3:8080/mcp): The host does not connect to 10.1.2.3:8080: it is a "
        f"private address and not allow-listed. {hint}",
        "agentConnections.claude.baseUrl (http://127.0.0.1:9/): The host does not connect to 127.0.0.1:9: it is a "
        f"private address and not allow-listed. {hint}"]
