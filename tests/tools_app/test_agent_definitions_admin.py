import html

from tools_app.models import AgentDefinition

BUILTIN = "github-cli-builtin-tools"


def form(tenant, tools):
    return {"tenant": tenant.pk, "name": "reviewer", "provider": "github-copilot", "model": "gpt-5",
            "instructions": "", "tools": tools}


def test_the_admin_shows_a_pointer_precise_error_for_a_malformed_definition(acme, tenant_admin):
    tools = ('[{"kind": "mcp", "serverName": "github"},'
             ' {"kind": "github-cli-builtin-tools", "excluded-tools": {"tools": ["shell"], "isolated": false}}]')
    response = tenant_admin.post("/admin/tools_app/agentdefinition/add/", form(acme.tenant, tools))
    assert response.status_code == 200
    error = ("/tools/1/excluded-tools: {'tools': ['shell'], 'isolated': False} "
             "is not valid under any of the given schemas")
    assert response.context["adminform"].form.errors["tools"] == [error]
    assert html.escape(error) in response.content.decode()
    assert not AgentDefinition.objects.exists()


def test_the_admin_puts_the_interlock_error_on_the_tools_field(acme, tenant_admin):
    tools = '[{"kind": "github-cli-builtin-tools", "client-mode": "empty", "available-tools": {"tools": []}}]'
    response = tenant_admin.post("/admin/tools_app/agentdefinition/add/", form(acme.tenant, tools))
    assert response.context["adminform"].form.errors["tools"] == [
        "/tools/0/available-tools/tools: [] should be non-empty"
    ]


def test_a_tenant_admin_saves_a_definition(acme, tenant_admin):
    tools = '[{"kind": "github-cli-builtin-tools", "client-mode": "empty", "available-tools": {"tools": ["mcp:*"]}}]'
    response = tenant_admin.post("/admin/tools_app/agentdefinition/add/", form(acme.tenant, tools))
    assert response.status_code == 302
    row = AgentDefinition.objects.get(tenant=acme.tenant, name="reviewer")
    assert row.builtin_tool_policy().available_tools == ["mcp:*"]
    change = tenant_admin.post(f"/admin/tools_app/agentdefinition/{row.pk}/change/", form(acme.tenant, "[]"))
    assert change.status_code == 302
    row.refresh_from_db()
    assert row.tools == []


def test_a_tenant_admin_sees_only_their_tenants_definitions(acme, globex, tenant_admin):
    for tenant, name in ((acme.tenant, "acme-reviewer"), (globex.tenant, "globex-secret")):
        row = AgentDefinition(tenant=tenant, name=name, provider="echo")
        row.save()
    page = tenant_admin.get("/admin/tools_app/agentdefinition/").content.decode()
    assert "acme-reviewer" in page and "globex-secret" not in page
