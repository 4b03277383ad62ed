"""The live view's page: staff of the tenant only, with a token acting as the operator that
ends by itself."""
import re
import time
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
