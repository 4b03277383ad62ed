"""Open sockets follow revocation and demotion without waiting for the socket to speak."""
import time

import pytest
from django.utils import timezone
from websockets.exceptions import ConnectionClosed

from grants.actions import do_add_member, do_deactivate_person, do_remove_member, do_revoke_token, do_set_role
from grants.models import ApiToken

from .harness import AhpClient


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


def test_a_token_revoked_without_news_still_closes_within_a_heartbeat(acme, host):
    from sessions_app.events.presence import HEARTBEAT_SECONDS

    with AhpClient(host.port, acme.tokens["member"], "silent") as silent:
        ApiToken.objects.filter(name="acme-member").update(revoked=timezone.now())  # as another process would
        assert closed_code(silent, within=HEARTBEAT_SECONDS + 3) == 4401


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
