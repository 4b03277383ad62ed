"""Changes made in the admin reach open sockets at once, as the grants functions make them."""
import time

from django.contrib.auth import get_user_model

from grants.models import Membership, Role

from ..ahp.protocol.harness import AhpClient
from ..ahp.protocol.test_socket_lifetime import closed_code


def test_deleting_a_membership_in_the_admin_closes_the_persons_socket(acme, host, tenant_admin):
    with AhpClient(host.port, acme.tokens["member"], "silent") as silent:
        membership = Membership.objects.get(tenant=acme.tenant, person=acme.member)
        response = tenant_admin.post(f"/admin/grants/membership/{membership.pk}/delete/", {"post": "yes"})
        assert (response.status_code, response["Location"]) == (302, "/admin/grants/membership/")
        assert closed_code(silent, within=2) == 4401


def test_a_role_edited_in_the_admin_takes_effect_on_open_sockets(acme, host, tenant_admin):
    with AhpClient(host.port, acme.tokens["member"], "member") as member:
        session = member.create_session()
        response = tenant_admin.post("/admin/grants/role/add/",
                                     {"tenant": acme.tenant.pk, "name": "member", "grants": '["session:read"]'})
        assert (response.status_code, response["Location"]) == (302, "/admin/grants/role/")
        assert Role.objects.get(tenant=acme.tenant, name="member")
        time.sleep(0.5)  # the news travels; the socket says nothing meanwhile
        member.dispatch(session, {"type": "session/titleChanged", "title": "still mine?"})
        assert member.action("session/titleChanged", rejected=True)["rejectionReason"] == (
            "acme-member may not session:rename here")


def test_deactivating_a_person_in_the_admin_closes_their_socket(acme, host, admin_client):
    with AhpClient(host.port, acme.tokens["member"], "silent") as silent:
        page = admin_client.get(f"/admin/auth/user/{acme.member.pk}/change/")
        form = page.context["adminform"].form
        data = {name: value for name, value in form.initial.items() if value is not None and name != "password"}
        data.update({"username": acme.member.username, "is_active": "", "date_joined_0": "2026-01-01",
                     "date_joined_1": "00:00:00", "groups": [], "user_permissions": []})
        data.pop("is_active")
        data.pop("last_login", None)
        response = admin_client.post(f"/admin/auth/user/{acme.member.pk}/change/", data)
        assert response.status_code == 302, response.context["adminform"].form.errors
        assert response["Location"] == "/admin/auth/user/"
        assert closed_code(silent, within=2) == 4401


def test_deleting_a_person_in_the_admin_closes_their_socket(acme, host, admin_client):
    with AhpClient(host.port, acme.tokens["member"], "silent") as silent:
        response = admin_client.post(f"/admin/auth/user/{acme.member.pk}/delete/", {"post": "yes"})
        assert (response.status_code, response["Location"]) == (302, "/admin/auth/user/")
        assert not get_user_model().objects.filter(pk=acme.member.pk).exists()
        assert closed_code(silent, within=2) == 4401
