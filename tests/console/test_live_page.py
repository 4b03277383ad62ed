"""The live view's page: staff of the tenant only, with a token acting as the operator that
ends by itself."""
import json
import re
import time
import uuid
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient
from websockets.exceptions import ConnectionClosed, InvalidStatus

from grants import actions as grants_actions
from grants.actions import do_mint_page_token
from grants.models import ApiToken

from ..ahp.protocol.harness import AhpClient

PING = {"channel": "ahp-root://"}


def page_token(response):
    return re.search(r'data-token="([^"]+)"', response.content.decode()).group(1)


def test_the_page_carries_a_token_acting_as_the_operator_for_thirty_minutes(acme, tenant_admin):
    response = tenant_admin.get(f"/console/{acme.tenant.slug}/live")
    assert response.status_code == 200 and response["Cache-Control"].startswith("max-age=0")
    token = ApiToken.authenticate(page_token(response))
    assert token.person == acme.admin and token.tenant == acme.tenant
    assert timedelta(minutes=29) < token.expires - timezone.now() <= timedelta(minutes=30)


def test_an_expired_page_token_opens_nothing_and_goes_at_the_next_mint(acme):
    plaintext = do_mint_page_token(acme.tenant, acme.admin)
    ApiToken.objects.filter(name__startswith="console-page-").update(expires=timezone.now())
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    assert client.get("/api/v1/sessions").status_code == 401
    do_mint_page_token(acme.tenant, acme.admin)
    assert ApiToken.objects.filter(name__startswith="console-page-").count() == 1


@pytest.mark.e2e  # a real socket
def test_a_page_token_ending_closes_its_socket_and_opens_no_new_one(acme, host, monkeypatch):
    monkeypatch.setattr(grants_actions, "PAGE_TOKEN_LIFETIME", timedelta(seconds=2))
    plaintext = do_mint_page_token(acme.tenant, acme.admin)
    with AhpClient(host.port, plaintext) as client:
        assert client.call("ping", PING) is None
        time.sleep(2.2)  # the token's lifetime passes: no write tells the socket
        with pytest.raises(ConnectionClosed) as closed:
            client.call("ping", PING)
        assert (closed.value.rcvd.code, closed.value.rcvd.reason) == (4401, "The connection's token was revoked.")
    with pytest.raises(InvalidStatus) as refused:
        AhpClient(host.port, plaintext)
    assert refused.value.response.status_code == 403


def test_another_tenants_page_does_not_exist_and_people_need_staff(acme, globex, tenant_admin):
    assert tenant_admin.get(f"/console/{globex.tenant.slug}/live").status_code == 404
    member = Client()
    member.force_login(acme.member)
    response = member.get(f"/console/{acme.tenant.slug}/live")
    assert response.status_code == 302 and response["Location"].startswith("/admin/login/")
    assert not ApiToken.objects.filter(name__startswith="console-page-").exists()


def test_the_running_now_index_is_the_tenant_admins_alone(acme, globex, tenant_admin):
    from sessions_app.actions import do_create_session

    do_create_session(acme.principal("member"), uuid.uuid4())
    index = tenant_admin.get(f"/console/{acme.tenant.slug}/live/sessions").json()
    assert (index["count"], index["items"][0]["owner"], index["items"][0]["activity"]) == (1, "acme-member", "idle")
    response = tenant_admin.get(f"/console/{globex.tenant.slug}/live/sessions")
    assert (response.status_code, response.json()) == (404, {"error": "No such tenant."})
    acme.member.is_staff = True
    acme.member.save()
    member = Client()
    member.force_login(acme.member)  # staff, but not the tenant's admin
    response = member.get(f"/console/{acme.tenant.slug}/live/sessions")
    assert (response.status_code, response.json()) == (404, {"error": "No such tenant."})


@pytest.mark.e2e  # real sockets
def test_allow_from_a_person_without_the_grant_or_of_another_tenant_is_refused_and_the_call_waits(acme, globex, host):
    from sessions_app.models import ToolCall

    from ..tools_app.families.helpers import Desk
    from .test_live_steering import waiting_comment

    with Desk(host, acme, role="admin") as desk:
        desk.client.subscribe(desk.session_uri)
        waiting_comment(acme, desk.session)
        turn = desk.start("viewUnreviewedComments")
        request = desk.client.action("session/inputNeededSet")["action"]["request"]
        allow = {"type": "chat/toolCallConfirmed", "turnId": turn, "toolCallId": request["id"], "approved": True,
                 "confirmed": "user-action"}
        with AhpClient(host.port, acme.tokens["guest"], "guest-client") as guest:
            guest.dispatch(desk.chat_uri, allow)
            refused = guest.action("chat/toolCallConfirmed", rejected=True)
            assert refused["rejectionReason"] == "acme-guest may not chat:answer here"
        with AhpClient(host.port, globex.tokens["admin"], "globex-client") as stranger:
            stranger.dispatch(desk.chat_uri, allow)  # another tenant's chat is one that does not exist
            assert stranger.call("ping", PING) is None and stranger.notifications == []
        assert ToolCall.objects.get(id=request["id"]).confirmation == "asked"
        desk.client.dispatch(desk.chat_uri, allow)
        assert json.loads(desk.client.reply_to(turn))["comments"][0]["text"] == "Off by one"
