"""Per-person quotas on sessions, chats, creations a minute and open connections, at every door
that creates: the socket (createSession, createChat, connect), the session tools in a turn, and
REST (`POST /api/v1/tools/<name>`). Each refusal is one fixed sentence; others carry on."""
import re
import threading
import uuid

import pytest
from django.db import connection, transaction
from rest_framework.test import APIClient
from websockets.exceptions import ConnectionClosed

from kernel.refusals import Refused
from sessions_app import actions, quotas
from sessions_app.models import Chat, Session

from ..ahp.protocol.harness import AhpClient, RpcFailed
from ..tools_app.families.session.conftest import Place

CONFLICT = -32011
RATE = re.compile(r"Refusing to create more: you made 3 sessions and chats in the last minute, the most this host "
                  r"allows one person\. Retry after ([1-9]|[1-5][0-9]|60) seconds\.")
SESSIONS_FULL = ("Refusing to create a session: you already have 2 sessions that are not archived, the most this host "
                 "allows one person. Archive or delete one first.")
CHATS_FULL = ("Refusing to create a chat: you already have 1 chats that are not archived, the most this host "
              "allows one person. Archive or delete one first.")
CONNECTIONS_FULL = ("Refusing the connection: you already have 2 open connections, the most this host allows "
                    "one person.")


@pytest.fixture
def quota(settings):
    def set_to(**limits):
        for name, value in limits.items():
            setattr(settings, f"AHP_MAX_{name.upper()}", value)
    return set_to


def refused(call):
    with pytest.raises(RpcFailed) as failed:
        call()
    return failed.value.code, failed.value.message


def rest(token, name, body):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    response = client.post(f"/api/v1/tools/{name}", body, format="json")
    return response.status_code, response.json().get("error")


def test_the_session_quota_at_the_socket_counts_what_is_not_archived(acme, host, quota):
    quota(sessions_per_person=2)
    with AhpClient(host.port, acme.tokens["member"]) as alice, AhpClient(host.port, acme.tokens["admin"]) as admin:
        first = alice.create_session()
        alice.create_session()
        assert refused(lambda: alice.create_session()) == (CONFLICT, SESSIONS_FULL)
        assert Session.objects.filter(owner=acme.member).count() == 2
        admin.create_session()  # another person's quota is their own
        actions.do_set_flag(acme.principal("member"), Session.objects.get(pk=first.split("/")[-1]), "isArchived", True)
        alice.create_session()


def test_the_session_quota_at_the_session_tools_and_rest(acme, quota):
    place = Place(acme)
    quota(sessions_per_person=2)
    place.call("create_session", relationship="independent", prompt="p", title="second")
    with pytest.raises(Refused) as refusal:
        place.call("create_session", relationship="independent", prompt="p", title="third")
    assert refusal.value.sentence == SESSIONS_FULL
    assert rest(acme.tokens["member"], "create_session", {"relationship": "independent", "prompt": "p",
                                                          "title": "t"}) == (409, SESSIONS_FULL)
    assert Session.objects.filter(owner=acme.member).count() == 2


def test_the_chat_quota_at_the_socket(acme, host, quota):
    quota(chats_per_person=1)
    with AhpClient(host.port, acme.tokens["member"]) as alice:
        session = alice.create_session()  # a session's main chat is not counted
        new_chat = lambda: alice.call("createChat", {"channel": session, "chat": f"ahp-chat:/{uuid.uuid4()}"})
        assert new_chat() is None
        assert refused(new_chat) == (CONFLICT, CHATS_FULL)
        assert Chat.objects.filter(session__owner=acme.member).count() == 2


def test_the_chat_quota_at_the_session_tools_and_rest(acme, quota):
    place = Place(acme)
    quota(chats_per_person=1)
    place.call("create_chat", title="one")
    with pytest.raises(Refused) as refusal:
        place.call("create_chat", title="two")
    assert refusal.value.sentence == CHATS_FULL
    assert rest(acme.tokens["member"], "create_chat", {"session": place.session.uri, "title": "t"}) == (
        409, CHATS_FULL)
    assert rest(acme.tokens["admin"], "create_chat", {"session": place.session.uri, "title": "t"})[0] == 200


def test_the_creation_rate_at_the_socket_counts_sessions_and_chats_together(acme, host, quota):
    quota(creations_per_minute=3)
    with AhpClient(host.port, acme.tokens["member"]) as alice:
        session = alice.create_session()
        alice.create_session()
        assert alice.call("createChat", {"channel": session, "chat": f"ahp-chat:/{uuid.uuid4()}"}) is None
        code, sentence = refused(lambda: alice.create_session())
        assert code == CONFLICT and RATE.fullmatch(sentence), sentence
        code, sentence = refused(lambda: alice.call("createChat", {"channel": session,
                                                                   "chat": f"ahp-chat:/{uuid.uuid4()}"}))
        assert code == CONFLICT and RATE.fullmatch(sentence), sentence


def test_the_creation_rate_at_the_session_tools_and_rest(acme, quota):
    place = Place(acme)  # one session made
    quota(creations_per_minute=3)
    place.call("create_chat", title="two")
    place.call("create_session", relationship="independent", prompt="p", title="three")
    with pytest.raises(Refused) as refusal:
        place.call("create_chat", title="four")
    assert RATE.fullmatch(refusal.value.sentence)
    status, sentence = rest(acme.tokens["member"], "create_session", {"relationship": "independent", "prompt": "p",
                                                                      "title": "t"})
    assert status == 409 and RATE.fullmatch(sentence)


def test_the_root_token_has_a_quota_of_its_own(acme, host, quota):
    quota(sessions_per_person=2)
    with AhpClient(host.port, acme.tokens["member"]) as alice, AhpClient(host.port, acme.tokens["root"]) as root:
        alice.create_session()
        alice.create_session()
        root.create_session()
        root.create_session()
        assert refused(lambda: root.create_session()) == (CONFLICT, SESSIONS_FULL)


def closed_with(port, token):
    client = AhpClient(port, token, initialize=False)
    try:
        with pytest.raises(ConnectionClosed) as closed:
            client.call("ping", {"channel": "ahp-root://"})
        return closed.value.rcvd.code, closed.value.rcvd.reason
    finally:
        client.close()


def test_the_connection_quota_refuses_one_more_socket_with_its_sentence(acme, host, quota):
    quota(connections_per_person=2)
    first = AhpClient(host.port, acme.tokens["member"], "one")
    with AhpClient(host.port, acme.tokens["member"], "two"):
        assert closed_with(host.port, acme.tokens["member"]) == (4429, CONNECTIONS_FULL)
        with AhpClient(host.port, acme.tokens["admin"], "admin") as admin:  # another person connects
            assert admin.call("ping", {"channel": "ahp-root://"}) is None
        first.close()
        with AhpClient(host.port, acme.tokens["member"], "three") as third:  # a closed socket frees its place
            assert third.call("ping", {"channel": "ahp-root://"}) is None


def test_quota_sentences_are_fixed():
    assert quotas.sessions_full(2) == SESSIONS_FULL
    assert quotas.chats_full(1) == CHATS_FULL
    assert quotas.too_many_connections(2) == CONNECTIONS_FULL
    assert len(quotas.too_many_connections(10**6).encode()) <= 123  # fits a close frame's reason


@pytest.mark.django_db(transaction=True)
def test_a_creation_holding_its_persons_quota_lock_lets_that_persons_sockets_open(acme):
    """The lock serialises creations only: rows naming the person are written meanwhile (FOR
    UPDATE held their foreign-key checks, and under load that deadlocked)."""
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL: SQLite serialises every writer")
    principal = acme.principal("member")
    locked, release, opened = threading.Event(), threading.Event(), threading.Event()

    def creating():
        try:
            with transaction.atomic():
                assert quotas.quota_problem(principal, "session") is None
                locked.set()
                release.wait(30)
        finally:
            connection.close()

    def opening():
        try:
            actions.do_open_connections([(acme.tenant, "ide", "proc", acme.member, "")])
            opened.set()
        finally:
            connection.close()

    creator = threading.Thread(target=creating)
    creator.start()
    assert locked.wait(30)
    opener = threading.Thread(target=opening)
    opener.start()
    try:
        assert opened.wait(10), "the socket's opening waited for the creation's lock"
    finally:
        release.set()
        creator.join(30)
        opener.join(30)
