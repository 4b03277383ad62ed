"""No size of state breaks a subscriber: the host never sends a frame over the 1 MiB a client
takes (these clients close the connection, as a real one would, over anything larger), and
what would grow past it is capped, budgeted or trimmed."""
import uuid

import pytest
from rest_framework.test import APIClient

from ahp.protocol.consumer import MAX_FRAME_BYTES, answer_too_big
from sessions_app.actions import do_end_turn
from sessions_app.actions.chats import TOO_MANY_CHATS
from sessions_app.models import Chat, Session

from ..ahp.protocol.harness import AhpClient, RpcFailed, default_chat
from ..ahp.protocol.test_client_tools import OPEN_FILE, call_open_file

ROOT = "ahp-root://"


def client(host, people, client_id="alice", token="member"):
    return AhpClient(host.port, people.tokens[token], client_id, max_size=MAX_FRAME_BYTES)


def session_row(uri):
    return Session.objects.get(id=uri.removeprefix("ahp-session:/"))


def add_chats(session, count):
    Chat.objects.bulk_create([Chat(session=session, title=f"chat {i}") for i in range(count)])


def still_open(connection):
    assert connection.call("ping", {"channel": ROOT}) is None


def test_a_session_takes_at_most_1000_chats_by_the_socket_and_by_create_chat(acme, host):
    with client(host, acme) as alice:
        uri = alice.create_session()
        chat = default_chat(alice, uri)
        alice.subscribe(chat)
        add_chats(session_row(uri), 998)
        assert alice.call("createChat", {"channel": uri, "chat": f"ahp-chat:/{uuid.uuid4()}"}) is None
        with pytest.raises(RpcFailed) as refused:
            alice.call("createChat", {"channel": uri, "chat": f"ahp-chat:/{uuid.uuid4()}"})
        assert refused.value.message == TOO_MANY_CHATS
        assert alice.reply_to(alice.start_turn(chat, '/call create_chat {"title": "one more"}')) == TOO_MANY_CHATS
        assert len(alice.subscribe(uri)["chats"]) == 1000


def test_a_session_of_10000_chats_snapshots_its_newest_1000_and_its_default(acme, host):
    with client(host, acme) as alice:
        uri = alice.create_session()
        add_chats(session_row(uri), 10000)
        state = alice.subscribe(uri)
        assert len(state["chats"]) == 1001 and state["defaultChat"] in {c["resource"] for c in state["chats"]}
        still_open(alice)


def tools_of(size, prefix="tool"):
    """Tool definitions taking about `size` bytes as JSON."""
    count = max(1, size // 1000)
    return [{"name": f"{prefix}_{i}", "description": "x" * 950, "inputSchema": {"type": "object"}}
            for i in range(count)]


def announce(connection, uri, tools):
    connection.subscribe(uri)
    connection.dispatch(uri, {"type": "session/activeClientSet",
                              "activeClient": {"clientId": connection.client_id, "tools": tools}})


def test_announced_tools_beyond_a_clients_or_a_sessions_budget_are_refused(acme, host):
    with client(host, acme) as alice, client(host, acme, "ide") as ide:
        uri = alice.create_session()
        alice.subscribe(uri)
        announce(ide, uri, tools_of(1000 * 1000))
        reason = ide.action("session/activeClientSet", rejected=True)["rejectionReason"]
        assert reason.startswith("The tools ide announced take ") and reason.endswith(
            " bytes; a client may announce at most 131072 bytes of tool definitions.")
        helpers = [client(host, acme, f"helper{i}") for i in range(5)]
        try:
            for helper in helpers[:4]:
                announce(helper, uri, tools_of(120 * 1000, helper.client_id))
                helper.action("session/activeClientSet")
            announce(helpers[4], uri, tools_of(120 * 1000))
            reason = helpers[4].action("session/activeClientSet", rejected=True)["rejectionReason"]
            assert reason.startswith("The session's clients would announce ") and reason.endswith(
                " bytes of tool definitions; a session takes at most 524288.")
        finally:
            for helper in helpers:
                helper.close()
        assert len(alice.subscribe(uri)["activeClients"]) == 4
        still_open(alice)


def test_a_configuration_too_large_for_one_message_is_refused(acme, host):
    rest = APIClient()
    rest.credentials(HTTP_AUTHORIZATION=f"Bearer {acme.tokens['root']}")
    with client(host, acme, "operator", token="root") as operator:
        operator.subscribe(ROOT)
        answer = rest.patch("/api/v1/config", {"sessionToolsProviders": ["p" * 100] * 15000}, format="json")
        assert answer.status_code == 400
        assert answer.json()["error"].startswith("The configuration would take ")
        assert answer.json()["error"].endswith(" bytes; a tenant's configuration holds at most 262144.")
        still_open(operator)
        assert operator.subscribe(ROOT)["config"]["values"]["sessionToolsProviders"] != ["p" * 100] * 15000


def test_a_frame_over_the_limit_is_never_sent(acme, host):
    with client(host, acme) as alice, client(host, acme, "ide") as ide:
        uri = alice.create_session()
        chat = default_chat(alice, uri)
        alice.subscribe(chat)
        announce(ide, uri, [OPEN_FILE])
        ide.action("session/activeClientSet")  # applied, so the turn's catalog offers ide's tool
        turn, _ = call_open_file(alice, chat)
        do_end_turn(turn, response_text="x" * 1_200_000)  # as an agent answering 1.2 MB
        alice.action("chat/turnComplete", turnId=turn)  # its 1.2 MB chat/responsePart was left out, not sent
        assert alice.subscribe(chat)["turns"] == []  # too large for a snapshot: fetchTurns pages it
        with pytest.raises(RpcFailed) as refused:
            alice.call("fetchTurns", {"channel": chat})
        size = int(refused.value.message.split(" bytes")[0].rsplit(" ", 1)[1])
        assert size > MAX_FRAME_BYTES and refused.value.message == answer_too_big(size)
        still_open(alice)
        assert alice.reply_to(alice.start_turn(chat, "small again")) == "small again"
