from django.test import Client

from sessions_app.models import Session


def test_a_tenant_admin_sees_only_their_tenants_sessions(acme, globex, tenant_admin):
    Session.objects.create(tenant=acme.tenant, title="acme work")
    Session.objects.create(tenant=globex.tenant, title="globex secret")
    page = tenant_admin.get("/admin/sessions_app/session/").content.decode()
    assert "acme work" in page and "globex secret" not in page


def test_a_tenant_admin_cannot_open_another_tenants_session(acme, globex, tenant_admin):
    theirs = Session.objects.create(tenant=globex.tenant, title="globex secret")
    response = tenant_admin.get(f"/admin/sessions_app/session/{theirs.pk}/change/")
    # The admin's "does not exist" redirect, to its index: the signed-in admin, not a login page.
    assert (response.status_code, response["Location"]) == (302, "/admin/")
    page = tenant_admin.get(response["Location"]).content.decode()
    assert "doesn’t exist" in page and "globex secret" not in page


def test_a_tenant_admin_sees_only_their_tenant(acme, globex, tenant_admin):
    page = tenant_admin.get("/admin/grants/tenant/").content.decode()
    # Their own tenant's row, not merely the header's "acme-admin".
    assert f"/admin/grants/tenant/{acme.tenant.pk}/change/" in page and "globex" not in page
    assert tenant_admin.get(f"/admin/grants/tenant/{globex.tenant.pk}/change/")["Location"] == "/admin/"


def test_a_tenant_admin_can_edit_their_tenants_session(acme, tenant_admin):
    mine = Session.objects.create(tenant=acme.tenant, title="acme work")
    assert tenant_admin.get(f"/admin/sessions_app/session/{mine.pk}/change/").status_code == 200


def test_a_member_with_staff_flag_but_no_admin_role_sees_nothing(acme):
    acme.member.is_staff = True
    acme.member.save()
    client = Client()
    client.force_login(acme.member)
    assert client.get("/admin/sessions_app/session/").status_code == 403


def test_a_superuser_sees_every_tenant(acme, globex, admin_client):
    Session.objects.create(tenant=acme.tenant, title="acme work")
    Session.objects.create(tenant=globex.tenant, title="globex secret")
    page = admin_client.get("/admin/sessions_app/session/").content.decode()
    assert "acme work" in page and "globex secret" in page



TENANT_FILTERED_LISTS = ["/admin/sessions_app/session/", "/admin/sessions_app/chat/", "/admin/sessions_app/turn/",
                         "/admin/sessions_app/toolcall/", "/admin/console/auditentry/", "/admin/grants/role/",
                         "/admin/grants/membership/", "/admin/grants/apitoken/", "/admin/tools_app/agentdefinition/"]


def test_no_admin_list_filter_names_a_tenant_the_admin_does_not_administer(acme, globex, tenant_admin):
    from grants.actions import do_create_tenant

    do_create_tenant("initech")
    for page in TENANT_FILTERED_LISTS:
        response = tenant_admin.get(page)
        assert response.status_code == 200, page
        body = response.content.decode()
        assert "globex" not in body and "initech" not in body, page


def test_a_superuser_filters_by_every_tenant(acme, globex, admin_client):
    body = admin_client.get("/admin/sessions_app/session/").content.decode()
    assert f"?tenant__id__exact={acme.tenant.pk}" in body and f"?tenant__id__exact={globex.tenant.pk}" in body


def test_a_superuser_renames_a_tenant_in_the_admin(acme, admin_client):
    page = admin_client.get(f"/admin/grants/tenant/{acme.tenant.pk}/change/")
    initial = page.context["adminform"].form.initial
    created = initial["created"]
    data = {"slug": initial["slug"], "name": "Acme Renamed", "workspace_root": initial.get("workspace_root") or "",
            "created_0": created.strftime("%Y-%m-%d"), "created_1": created.strftime("%H:%M:%S")}
    response = admin_client.post(f"/admin/grants/tenant/{acme.tenant.pk}/change/", data)
    assert response.status_code == 302, response.context["adminform"].form.errors
    acme.tenant.refresh_from_db()
    assert acme.tenant.name == "Acme Renamed"
