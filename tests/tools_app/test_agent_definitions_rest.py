import pytest
from rest_framework.test import APIClient

from grants.actions import do_add_member, do_mint_token
from tools_app.models import AgentDefinition

BUILTIN = "github-cli-builtin-tools"
LOCKED_DOWN = {
    "name": "sandboxed-worker", "provider": "github-copilot", "model": "gpt-5", "instructions": "Only MCP.",
    "tools": [{"kind": "mcp", "serverName": "github"},
              {"kind": BUILTIN, "client-mode": "empty", "available-tools": {"tools": ["mcp:*"]}}],
}


@pytest.fixture(autouse=True)
def github_server(acme):
    """The tenant's MCP server `github`, which the definitions here name."""
    from tools_app.models import HostConfig

    HostConfig.objects.filter(pk=HostConfig.for_tenant(acme.tenant).pk).update(
        mcp_servers={"github": {"type": "http", "url": "https://github.example/mcp"}})


def api(token):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


@pytest.fixture
def auditor_token(acme):
    """A person whose role may read the tenant's settings but not change them."""
    acme.tenant.roles.create(name="auditor", grants=["config:settings"])
    person = do_add_member(acme.tenant, "acme-auditor", "auditor").person
    return do_mint_token(acme.tenant, person=person, name="acme-auditor")[1]


def stored(tenant, **document):
    row = AgentDefinition(tenant=tenant)
    row.set_document({"provider": "echo", **document})
    row.save()
    return row


def test_it_creates_a_definition(acme):
    response = api(acme.tokens["admin"]).post("/api/v1/agent-definitions", LOCKED_DOWN, format="json")
    assert response.status_code == 201
    row = AgentDefinition.objects.get(tenant=acme.tenant, name="sandboxed-worker")
    assert response.json() == {"id": row.pk, **LOCKED_DOWN, "modified": row.modified.isoformat()}
    assert row.builtin_tool_policy().client_mode == "empty"


def test_it_lists_only_the_callers_tenants_definitions(acme, globex):
    stored(acme.tenant, name="b-reviewer")
    stored(acme.tenant, name="a-helper")
    stored(globex.tenant, name="globex-secret")
    response = api(acme.tokens["root"]).get("/api/v1/agent-definitions")
    assert response.status_code == 200
    assert [item["name"] for item in response.json()["items"]] == ["a-helper", "b-reviewer"]


def test_it_retrieves_a_definition(acme):
    row = stored(acme.tenant, name="reviewer", tools=[{"kind": BUILTIN, "excluded-tools": {"tools": ["shell"]}}])
    response = api(acme.tokens["admin"]).get(f"/api/v1/agent-definitions/{row.pk}")
    assert response.status_code == 200
    assert response.json()["tools"] == [{"kind": BUILTIN, "excluded-tools": {"tools": ["shell"]}}]


def test_it_updates_a_definition(acme):
    row = stored(acme.tenant, name="reviewer")
    client = api(acme.tokens["admin"])
    document = client.get(f"/api/v1/agent-definitions/{row.pk}").json()  # id and modified echoed back
    document["tools"] = [{"kind": BUILTIN, "available-tools": {"isolated": True}}]
    response = client.put(f"/api/v1/agent-definitions/{row.pk}", document, format="json")
    assert response.status_code == 200
    row.refresh_from_db()
    assert row.tools == [{"kind": BUILTIN, "available-tools": {"isolated": True}}]


def test_it_refuses_a_malformed_definition_with_its_json_pointer(acme):
    document = {**LOCKED_DOWN, "tools": [{"kind": "web_request"}, {"kind": "mcp", "serverName": "github"},
                                         {"kind": BUILTIN, "available-tools": {"tools": ["read agent"]}}]}
    response = api(acme.tokens["admin"]).post("/api/v1/agent-definitions", document, format="json")
    assert response.status_code == 400
    message = "'read agent' does not match '^(\\\\*|[a-zA-Z0-9_-]+|(builtin|custom|mcp):(\\\\*|[a-zA-Z0-9_-]+))$'"
    assert response.json() == {
        "error": f"/tools/2/available-tools/tools/0: {message}",
        "pointer": "/tools/2/available-tools/tools/0",
        "message": message,
    }
    assert not AgentDefinition.objects.exists()


def test_a_refused_update_leaves_the_row_alone(acme):
    row = stored(acme.tenant, name="reviewer")
    document = {"name": "reviewer", "provider": "github-copilot", "tools": [{"kind": BUILTIN, "client-mode": "empty"}]}
    response = api(acme.tokens["admin"]).put(f"/api/v1/agent-definitions/{row.pk}", document, format="json")
    assert response.status_code == 400
    assert response.json()["error"] == "/tools/0: 'available-tools' is a required property"
    row.refresh_from_db()
    assert row.provider == "echo" and row.tools == []


def test_it_refuses_a_second_definition_of_the_same_name(acme):
    stored(acme.tenant, name="sandboxed-worker")
    response = api(acme.tokens["admin"]).post("/api/v1/agent-definitions", LOCKED_DOWN, format="json")
    assert response.status_code == 400
    assert response.json() == {"error": "Tenant acme already has an agent definition named sandboxed-worker."}


def test_it_refuses_writes_without_config_change(acme, auditor_token):
    row = stored(acme.tenant, name="reviewer")
    for token in (auditor_token, acme.tokens["member"]):
        client = api(token)
        response = client.post("/api/v1/agent-definitions", LOCKED_DOWN, format="json")
        assert response.status_code == 403
        assert response.json() == {"error": "You need config:change to change agent definitions."}
        response = client.put(f"/api/v1/agent-definitions/{row.pk}", LOCKED_DOWN, format="json")
        assert response.status_code == 403
    assert AgentDefinition.objects.get().name == "reviewer"


def test_it_refuses_deleting_without_config_change(acme, auditor_token):
    row = stored(acme.tenant, name="reviewer")
    response = api(auditor_token).delete(f"/api/v1/agent-definitions/{row.pk}")
    assert response.status_code == 403
    assert response.json() == {"error": "You need config:change to change agent definitions."}
    assert AgentDefinition.objects.get().name == "reviewer"


def test_it_refuses_reads_without_config_settings(acme):
    row = stored(acme.tenant, name="reviewer")
    client = api(acme.tokens["member"])
    for url in ("/api/v1/agent-definitions", f"/api/v1/agent-definitions/{row.pk}"):
        response = client.get(url)
        assert response.status_code == 403
        assert response.json() == {"error": "You need config:settings to read agent definitions."}


def test_config_settings_is_enough_to_read(acme, auditor_token):
    stored(acme.tenant, name="reviewer")
    assert api(auditor_token).get("/api/v1/agent-definitions").status_code == 200


def test_another_tenants_definition_is_not_found(acme, globex):
    theirs = stored(globex.tenant, name="globex-secret")
    client = api(acme.tokens["root"])
    assert client.get(f"/api/v1/agent-definitions/{theirs.pk}").status_code == 404
    assert client.put(f"/api/v1/agent-definitions/{theirs.pk}", LOCKED_DOWN, format="json").status_code == 404
    theirs.refresh_from_db()
    assert theirs.name == "globex-secret"


def test_an_unknown_id_is_not_found(acme):
    assert api(acme.tokens["admin"]).get("/api/v1/agent-definitions/999999").status_code == 404


def test_it_refuses_a_wrong_method(acme):
    row = stored(acme.tenant, name="reviewer")
    assert api(acme.tokens["admin"]).patch(f"/api/v1/agent-definitions/{row.pk}", {}, format="json").status_code == 405
    assert api(acme.tokens["admin"]).patch("/api/v1/agent-definitions", {}, format="json").status_code == 405


def test_it_needs_a_token(acme):
    assert APIClient().get("/api/v1/agent-definitions").status_code == 401


def test_a_stored_definition_that_no_longer_passes_is_shown_with_its_error(acme):
    row = stored(acme.tenant, name="reviewer")
    AgentDefinition.objects.filter(pk=row.pk).update(tools=[{"kind": BUILTIN, "isolated": True}])
    body = api(acme.tokens["admin"]).get(f"/api/v1/agent-definitions/{row.pk}").json()
    assert body["invalid"] == "/tools/0: Additional properties are not allowed ('isolated' was unexpected)"
