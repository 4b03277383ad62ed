"""Tenant admins add people and set roles, mint tokens (shown once) and revoke them."""
from grants.models import ApiToken, Membership


def test_a_tenant_admin_adds_a_person_with_a_role(acme, tenant_admin):
    response = tenant_admin.post("/admin/grants/membership/add/",
                               {"tenant": acme.tenant.pk, "username": "carol", "role": "guest"})
    assert response.status_code == 302
    assert Membership.objects.get(tenant=acme.tenant, person__username="carol").role == "guest"


def test_a_tenant_admin_changes_a_role_and_an_unknown_role_is_refused(acme, tenant_admin):
    membership = Membership.objects.get(tenant=acme.tenant, person=acme.guest)
    url = f"/admin/grants/membership/{membership.pk}/change/"
    response = tenant_admin.post(url, {"username": "ignored", "role": "wizard"})
    assert response.context["adminform"].form.errors["role"] == ["Tenant acme has no role wizard."]
    assert tenant_admin.post(url, {"role": "member"}).status_code == 302
    membership.refresh_from_db()
    assert (membership.role, membership.person) == ("member", acme.guest)


def test_a_minted_token_is_shown_once_and_works(acme, tenant_admin, client):
    response = tenant_admin.post("/admin/grants/apitoken/add/",
                               {"tenant": acme.tenant.pk, "person": acme.member.pk, "name": "laptop"})
    assert response.status_code == 200
    plaintext = response.context["plaintext"]
    assert f'value="{plaintext}"' in response.content.decode()
    row = ApiToken.objects.get(tenant=acme.tenant, name="laptop")
    assert plaintext not in tenant_admin.get(f"/admin/grants/apitoken/{row.pk}/change/").content.decode()
    assert ApiToken.authenticate(plaintext) == row
    assert client.get("/api/v1/sessions", HTTP_AUTHORIZATION=f"Bearer {plaintext}").status_code == 200


def test_a_token_is_minted_only_for_a_person_of_an_administered_tenant(acme, globex, tenant_admin):
    response = tenant_admin.post("/admin/grants/apitoken/add/", {"tenant": globex.tenant.pk, "name": "evil"})
    assert "tenant" in response.context["adminform"].form.errors
    response = tenant_admin.post("/admin/grants/apitoken/add/",
                               {"tenant": acme.tenant.pk, "person": globex.member.pk, "name": "x"})
    assert "person" in response.context["adminform"].form.errors
    assert not ApiToken.objects.filter(name__in=["evil", "x"]).exists()


def test_a_tenant_admin_revokes_tokens(acme, tenant_admin, client):
    row = ApiToken.objects.get(tenant=acme.tenant, name="acme-member")
    response = tenant_admin.post("/admin/grants/apitoken/", {"action": "revoke", "_selected_action": [row.pk]})
    assert response.status_code == 302
    row.refresh_from_db()
    assert row.revoked is not None
    assert ApiToken.authenticate(acme.tokens["member"]) is None
    assert client.get("/api/v1/sessions", HTTP_AUTHORIZATION=f"Bearer {acme.tokens['member']}").status_code == 401
