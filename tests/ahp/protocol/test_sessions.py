"""Sessions and chats over a real socket: create, list, subscribe, dispose."""
import uuid

import pytest

from .harness import AhpClient, RpcFailed, default_chat


def test_create_session_answers_null_and_tells_root_subscribers(acme, host):
    with AhpClient(host.port, acme.tokens["member"]) as alice, AhpClient(host.port, acme.tokens["root"], "ops") as ops:
        ops.subscribe("ahp-root://")
        uri = alice.create_session()
        added = ops.notification("root/sessionAdded")
        assert added["summary"]["resource"] == uri and added["summary"]["provider"] == "echo"
        state = alice.subscribe(uri)
        assert state["lifecycle"] == "ready" and state["activeClients"] == [] and len(state["chats"]) == 1
        assert state["defaultChat"] == state["chats"][0]["resource"]


def test_create_session_refuses_an_existing_uri_and_an_unknown_provider(acme, host):
    with AhpClient(host.port, acme.tokens["member"]) as alice:
        uri = alice.create_session()
        with pytest.raises(RpcFailed) as exists:
            alice.call("createSession", {"channel": uri, "provider": "echo"})
        assert exists.value.code == -32003
        with pytest.raises(RpcFailed) as unknown:
            alice.create_session(provider="nobody")
        assert (unknown.value.code, unknown.value.message) == (-32002, "No agent for provider nobody.")


def test_a_guest_may_not_create_a_session(acme, host):
    with AhpClient(host.port, acme.tokens["guest"]) as guest:
        with pytest.raises(RpcFailed) as refused:
            guest.create_session()
        assert (refused.value.code, refused.value.message) == (-32009, "acme-guest may not session:create here")


def test_list_sessions_pages_most_recently_modified_first(acme, host):
    with AhpClient(host.port, acme.tokens["member"]) as alice:
        uris = [alice.create_session() for _ in range(5)]
        first = alice.call("listSessions", {"channel": "ahp-root://", "limit": 2})
        second = alice.call("listSessions", {"channel": "ahp-root://", "limit": 2, "cursor": first["nextCursor"]})
        third = alice.call("listSessions", {"channel": "ahp-root://", "limit": 2, "cursor": second["nextCursor"]})
        listed = [s["resource"] for page in (first, second, third) for s in page["items"]]
        assert listed == list(reversed(uris))
        assert "nextCursor" not in third
        with pytest.raises(RpcFailed) as bad:
            alice.call("listSessions", {"channel": "ahp-root://", "cursor": "bm9wZQ=="})
        assert bad.value.code == -32602


def test_list_sessions_shows_only_what_the_caller_may_read(acme, globex, host):
    with AhpClient(host.port, acme.tokens["member"]) as alice, AhpClient(host.port, globex.tokens["root"]) as other:
        alice.create_session()
        assert other.call("listSessions", {"channel": "ahp-root://"})["items"] == []


def test_another_tenants_session_cannot_be_subscribed_or_disposed(acme, globex, host):
    with AhpClient(host.port, acme.tokens["member"]) as alice, AhpClient(host.port, globex.tokens["root"]) as other:
        uri = alice.create_session()
        for method in ("subscribe", "disposeSession"):
            with pytest.raises(RpcFailed) as refused:
                other.call(method, {"channel": uri})
            assert refused.value.code == -32008


def test_another_tenants_session_id_is_refused_as_any_taken_id_is(acme, globex, host):
    with AhpClient(host.port, acme.tokens["member"]) as alice, AhpClient(host.port, globex.tokens["member"]) as outsider:
        uri = alice.create_session()
        answers = []
        for client in (outsider, alice):  # an outsider, then the tenant whose session it is
            with pytest.raises(RpcFailed) as refused:
                client.call("createSession", {"channel": uri, "provider": "echo"})
            answers.append((refused.value.code, refused.value.message))
        session_id = uri.split("/")[-1]
        expected = (-32003, f"Session id {session_id} is taken; create the session with a new id.")
        assert answers == [expected, expected]  # nothing tells the outsider whose it is
        assert outsider.create_session()  # a fresh id works


def test_only_the_owner_or_a_holder_of_session_star_disposes_a_session(acme, host):
    acme.tenant.roles.create(name="teammate", grants=["session:read", "session:write"])
    from grants.actions import do_add_member, do_mint_token

    bob = do_add_member(acme.tenant, "bob", "teammate").person
    _, bob_token = do_mint_token(acme.tenant, person=bob, name="bob")
    with AhpClient(host.port, acme.tokens["member"]) as alice, AhpClient(host.port, bob_token, "bob") as teammate, \
            AhpClient(host.port, acme.tokens["admin"], "admin") as admin:
        alice.subscribe("ahp-root://")
        uri = alice.create_session()
        other_uri = alice.create_session()
        with pytest.raises(RpcFailed) as refused:
            teammate.call("disposeSession", {"channel": uri})
        assert (refused.value.code, refused.value.message) == (-32009, "Only the session's owner can delete it.")
        assert alice.call("disposeSession", {"channel": uri}) is None
        assert alice.notification("root/sessionRemoved")["session"] == uri
        assert admin.call("disposeSession", {"channel": other_uri}) is None


def test_create_and_dispose_a_chat(acme, host):
    with AhpClient(host.port, acme.tokens["member"]) as alice:
        uri = alice.create_session()
        main_chat = default_chat(alice, uri)
        chat = f"ahp-chat:/{uuid.uuid4()}"
        assert alice.call("createChat", {"channel": uri, "chat": chat}) is None
        added = alice.action("session/chatAdded")
        assert added["action"]["summary"]["resource"] == chat and added["channel"] == uri
        assert alice.subscribe(chat)["turns"] == []
        assert alice.call("disposeChat", {"channel": chat}) is None
        assert alice.action("session/chatRemoved")["action"]["chat"] == chat
        with pytest.raises(RpcFailed) as refused:
            alice.call("disposeChat", {"channel": main_chat})
        assert refused.value.message == "A session's default chat goes only with its session; dispose the session."


def test_create_chat_with_an_initial_message_starts_a_turn(acme, host):
    with AhpClient(host.port, acme.tokens["member"]) as alice:
        uri = alice.create_session()
        chat = f"ahp-chat:/{uuid.uuid4()}"
        alice.subscribe(uri)
        alice.call("createChat", {"channel": uri, "chat": chat, "initialMessage": {"text": "hello there"}})
        alice.subscribe(chat)
        state = alice.subscribe(chat)
        turns = state["turns"] + ([state["activeTurn"]] if "activeTurn" in state else [])
        assert turns and turns[0]["message"]["text"] == "hello there"
