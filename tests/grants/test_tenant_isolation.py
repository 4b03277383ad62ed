import pytest
from guardian.shortcuts import assign_perm
from rest_framework.test import APIClient

from sessions_app.models import Chat, Session, ToolCall, Turn


@pytest.fixture
def sessions(acme, globex):
    mine = Session.objects.create(tenant=acme.tenant, owner=acme.member, title="acme work")
    theirs = Session.objects.create(tenant=globex.tenant, owner=globex.member, title="globex secret")
    return mine, theirs


def client_for(token):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


def test_a_token_lists_only_its_own_tenants_sessions(acme, sessions):
    response = client_for(acme.tokens["root"]).get("/api/v1/sessions")
    assert response.status_code == 200
    assert [item["title"] for item in response.json()["items"]] == ["acme work"]


def test_a_token_cannot_fetch_another_tenants_session(acme, sessions):
    _, theirs = sessions
    response = client_for(acme.tokens["root"]).get(f"/api/v1/sessions/{theirs.id}")
    assert response.status_code == 404


def test_a_token_fetches_its_own_tenants_session(acme, sessions):
    mine, _ = sessions
    response = client_for(acme.tokens["guest"]).get(f"/api/v1/sessions/{mine.id}")
    assert response.status_code == 200
    assert response.json()["resource"] == f"ahp-session:/{mine.id}"


def test_a_request_without_a_token_is_refused(sessions):
    assert APIClient().get("/api/v1/sessions").status_code == 401
    response = client_for("ahp_nope_nope").get("/api/v1/sessions")
    assert response.status_code == 401
    assert response.json() == {"detail": "Unknown or revoked token."}


def test_a_person_without_a_role_grant_sees_only_sessions_granted_to_them(acme, sessions):
    mine, _ = sessions
    other = Session.objects.create(tenant=acme.tenant, title="not shared")
    acme.tenant.roles.create(name="contractor", grants=[])
    from grants.actions import do_add_member, do_mint_token

    membership = do_add_member(acme.tenant, "carol", "contractor")
    _, token = do_mint_token(acme.tenant, person=membership.person, name="carol")
    assert client_for(token).get("/api/v1/sessions").json()["items"] == []
    assign_perm("sessions_app.session:write", membership.person, mine)
    assert client_for(token).get("/api/v1/sessions").json()["items"] == []
    assign_perm("sessions_app.session:read", membership.person, mine)
    items = client_for(token).get("/api/v1/sessions").json()["items"]
    assert [i["title"] for i in items] == ["acme work"]
    assert client_for(token).get(f"/api/v1/sessions/{other.id}").status_code == 404


def test_every_tenant_owned_model_is_scoped_by_its_manager(acme, globex, sessions):
    mine, theirs = sessions
    for session in sessions:
        chat = Chat.objects.create(session=session, is_default=True)
        turn = Turn.objects.create(chat=chat, text="hi")
        ToolCall.objects.create(turn=turn, tenant=turn.chat.session.tenant, tool_name="list_sessions")
    for model in (Session, Chat, Turn, ToolCall):
        rows = model.objects.for_tenant(acme.tenant)
        assert rows.count() == 1
        assert model.objects.for_tenant(globex.tenant).count() == 1
        assert not rows.filter(pk__in=model.objects.for_tenant(globex.tenant).values("pk")).exists()
