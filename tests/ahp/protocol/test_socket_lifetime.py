"""Open sockets follow revocation and demotion without waiting for the socket to speak."""
import time

import pytest
from django.utils import timezone
from websockets.exceptions import ConnectionClosed

from grants.actions import do_add_member, do_deactivate_person, do_remove_member, do_revoke_token, do_set_role
from grants.models import ApiToken

from ...conftest import manage
from .harness import AhpClient, RpcFailed


def closed_code(client, within):
    """The close code a silent client's socket gets within `within` seconds."""
    started = time.monotonic()
    with pytest.raises(ConnectionClosed) as closed:
        while True:
            client.ws.recv(timeout=max(0.01, within - (time.monotonic() - started)))
    return closed.value.rcvd.code


def title_pushes(client, settle=0.5):
    """The titleChanged pushes `client` got, after a round trip that follows any sent before."""
    time.sleep(settle)
    client.call("ping")
    return [f for f in client.notifications if f.get("method") == "action"
            and f["params"]["action"].get("type") == "session/titleChanged"]


@pytest.mark.parametrize("ending", ["revoke the token", "deactivate the person", "remove the membership"])
def test_a_silent_socket_is_closed_at_once(acme, host, ending):
    with AhpClient(host.port, acme.tokens["admin"], "admin") as admin, \
            AhpClient(host.port, acme.tokens["member"], "silent") as silent:
        session = admin.create_session()
        silent.subscribe(session)
        if ending == "revoke the token":
            do_revoke_token(acme.tenant, "acme-member")
        elif ending == "deactivate the person":
            do_deactivate_person(acme.member)
        else:
            do_remove_member(acme.tenant, acme.member)
        assert closed_code(silent, within=2) == 4401
        assert admin.call("ping") is None  # nobody else's socket goes with it


def test_a_token_revoked_without_news_still_closes_within_a_heartbeat(acme, host, monkeypatch):
    from sessions_app.events import sockets

    monkeypatch.setattr(sockets, "HEARTBEAT_SECONDS", 0.2)  # read by the heartbeat as this socket starts it
    with AhpClient(host.port, acme.tokens["member"], "silent") as silent:
        ApiToken.objects.filter(name="acme-member").update(revoked=timezone.now())  # as another process would
        assert closed_code(silent, within=0.2 + 3) == 4401


def test_a_demoted_members_open_socket_writes_with_the_new_role(acme, host):
    with AhpClient(host.port, acme.tokens["admin"], "admin") as admin, \
            AhpClient(host.port, acme.tokens["member"], "member") as member:
        session = admin.create_session()
        member.subscribe(session)
        do_add_member(acme.tenant, "acme-member", "guest")
        time.sleep(0.5)  # the news travels; the socket says nothing meanwhile
        member.dispatch(session, {"type": "session/titleChanged", "title": "mine now"})
        assert member.action("session/titleChanged", rejected=True)["rejectionReason"] == (
            "acme-member may not session:rename here")


def test_a_socket_whose_role_loses_session_read_gets_no_more_pushes(acme, host):
    with AhpClient(host.port, acme.tokens["admin"], "admin") as admin, \
            AhpClient(host.port, acme.tokens["member"], "member") as member:
        session = admin.create_session()
        admin.subscribe(session)
        member.subscribe(session)
        admin.dispatch(session, {"type": "session/titleChanged", "title": "before"})
        admin.action("session/titleChanged")
        assert [f["params"]["action"]["title"] for f in title_pushes(member)] == ["before"]
        member.notifications.clear()
        do_set_role(acme.tenant, "member", ["terminal:read"])
        time.sleep(0.5)
        admin.dispatch(session, {"type": "session/titleChanged", "title": "after"})
        admin.action("session/titleChanged")
        assert title_pushes(member) == []


@pytest.mark.e2e  # manage.py in a process of its own: on the embedded host no channel layer reaches it
def test_a_demotion_from_another_process_holds_at_the_next_write(acme, host):
    with AhpClient(host.port, acme.tokens["admin"], "admin") as admin:
        admin.create_session()
        assert manage("addmember", "acme", "acme-admin", "--role", "guest") == "acme-admin is guest in acme\n"
        with pytest.raises(RpcFailed) as refused:
            admin.create_session()
        assert (refused.value.code, refused.value.message) == (-32009, "acme-admin may not session:create here")


@pytest.mark.e2e  # manage.py in a process of its own
def test_a_silent_socket_demoted_from_another_process_gets_no_more_pushes(acme, host, monkeypatch):
    from sessions_app.events import sockets

    monkeypatch.setattr(sockets, "HEARTBEAT_SECONDS", 0.2)
    acme.tenant.roles.create(name="terminals-only", grants=["terminal:read"])
    with AhpClient(host.port, acme.tokens["admin"], "admin") as admin, \
            AhpClient(host.port, acme.tokens["member"], "member") as member:
        session = admin.create_session()
        admin.subscribe(session)
        member.subscribe(session)
        manage("addmember", "acme", "acme-member", "--role", "terminals-only")
        time.sleep(1)  # heartbeats pass; the member says nothing meanwhile
        admin.dispatch(session, {"type": "session/titleChanged", "title": "after"})
        admin.action("session/titleChanged")
        assert title_pushes(member) == []


def test_a_grants_changed_message_is_news_and_never_the_grants(acme, host):
    from channels.layers import get_channel_layer

    from grants.actions import person_group
    from kernel.outbox import send_soon

    async def forge():  # what someone reaching the channel layer could send
        await get_channel_layer().group_send(person_group(acme.guest.pk), {
            "type": "ahp.grants_changed", "tenant_id": acme.tenant.pk, "grants": ["*:*"]})

    with AhpClient(host.port, acme.tokens["guest"], "guest") as guest:
        send_soon("a forged grants change", forge)
        time.sleep(0.5)  # the message travels; the socket says nothing meanwhile
        with pytest.raises(RpcFailed) as refused:
            guest.create_session()
        assert (refused.value.code, refused.value.message) == (-32009, "acme-guest may not session:create here")
