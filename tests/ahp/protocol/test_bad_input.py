"""Malformed frames get a defined error; the connection and the worker survive every one."""
import json
import uuid

import pytest
from websockets.exceptions import ConnectionClosed

from .harness import AhpClient


def answer(client, raw):
    client.send(raw)
    return json.loads(client.ws.recv(timeout=10))


def still_alive(client):
    assert client.call("ping", {"channel": "ahp-root://"}) is None


@pytest.mark.parametrize("raw,code,message", [
    ("{nope", -32700, "Parse error: the frame is not JSON."),
    ("[1, 2]", -32600, "Invalid request: not a JSON-RPC 2.0 message."),
    ('{"jsonrpc": "1.0", "id": 1, "method": "ping"}', -32600, "Invalid request: not a JSON-RPC 2.0 message."),
    ('{"jsonrpc": "2.0", "id": 1, "method": "teleport", "params": {}}', -32601, "Method not found: teleport"),
    ('{"jsonrpc": "2.0", "id": 1, "method": "subscribe", "params": {}}', -32602,
     "Invalid params: channel is required."),
    ('{"jsonrpc": "2.0", "id": 1, "method": "subscribe", "params": {"channel": 7}}', -32602,
     "Invalid params: channel must be a string."),
    ('{"jsonrpc": "2.0", "id": 1, "method": "listSessions", "params": {"limit": "ten"}}', -32602,
     "Invalid params: limit must be a positive number."),
    ('{"jsonrpc": "2.0", "id": 1, "method": "subscribe", "params": [1]}', -32602,
     "Invalid params: params must be an object."),
    ('{"jsonrpc": "2.0", "id": 1, "method": "subscribe", "params": {"channel": "ahp-session:/not-a-uuid"}}',
     -32008, "No channel ahp-session:/not-a-uuid here."),
])
def test_each_malformed_frame_gets_its_error_and_the_connection_survives(acme, host, raw, code, message):
    with AhpClient(host.port, acme.tokens["member"]) as client:
        error = answer(client, raw)["error"]
        assert (error["code"], error["message"]) == (code, message)
        still_alive(client)


def frames_before_pong(client):
    """Every frame that arrives before the answer to a ping sent now: what the host said to what
    was sent before it."""
    client.send({"jsonrpc": "2.0", "id": 999999, "method": "ping", "params": {"channel": "ahp-root://"}})
    frames = []
    while True:
        frame = json.loads(client.ws.recv(timeout=10))
        if frame.get("id") == 999999:
            return frames
        frames.append(frame)


@pytest.mark.parametrize("notification", [
    {"method": "dispatchAction", "params": {"channel": "ahp-root://", "action": {}}},
    {"method": "unsubscribe", "params": {}},
    {"method": "session/teleport", "params": {"channel": "ahp-root://"}},
    {"method": "dispatchAction", "params": [1]},
], ids=["dispatchAction without clientSeq", "unsubscribe without channel", "unknown", "params not an object"])
def test_a_malformed_notification_is_never_answered(acme, host, notification):
    with AhpClient(host.port, acme.tokens["member"]) as client:
        client.send({"jsonrpc": "2.0", **notification})
        assert frames_before_pong(client) == []


def test_a_binary_frame_is_an_error_not_a_disconnect(acme, host):
    with AhpClient(host.port, acme.tokens["member"]) as client:
        error = answer(client, b"\x00\x01")["error"]
        assert (error["code"], error["message"]) == (-32600, "Invalid request: AHP messages are text frames.")
        still_alive(client)


def test_a_frame_over_one_mib_closes_with_1009_and_other_connections_carry_on(acme, host):
    with AhpClient(host.port, acme.tokens["member"]) as big, AhpClient(host.port, acme.tokens["member"], "b") as other:
        big.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"pad": "x" * (1024 * 1024)}}))
        with pytest.raises(ConnectionClosed) as closed:
            big.ws.recv(timeout=10)
        assert closed.value.rcvd.code == 1009
        still_alive(other)


def test_actions_on_an_unknown_or_foreign_channel_are_ignored(acme, globex, host):
    with AhpClient(host.port, acme.tokens["member"]) as alice, AhpClient(host.port, globex.tokens["root"]) as other:
        theirs = other.create_session()
        other.subscribe(theirs)
        alice.dispatch(theirs, {"type": "session/titleChanged", "title": "mine now"})
        alice.dispatch(f"ahp-session:/{uuid.uuid4()}", {"type": "session/titleChanged", "title": "nobody's"})
        alice.dispatch(f"ahp-chat:/{uuid.uuid4()}", {"type": "chat/turnStarted", "turnId": str(uuid.uuid4()),
                                                      "message": {"text": "hi"}})
        assert frames_before_pong(alice) == []
        assert other.subscribe(theirs)["title"] == ""


def test_a_bad_action_is_echoed_with_its_reason_and_no_number_of_its_own(acme, host):
    with AhpClient(host.port, acme.tokens["member"]) as alice:
        session = alice.create_session()
        alice.subscribe(session)
        alice.dispatch(session, {"type": "session/titleChanged", "title": "fine"})
        accepted = alice.action("session/titleChanged")
        alice.dispatch("ahp-root://", {"type": "session/teleported"})
        rejected = alice.action("session/teleported", rejected=True)
        assert rejected["rejectionReason"] == "This host does not accept 'session/teleported' from clients."
        assert rejected["origin"] == {"clientId": "test-client", "clientSeq": 2}
        assert rejected["serverSeq"] == 0 < accepted["serverSeq"]
        still_alive(alice)


def test_a_client_may_send_only_user_messages(acme, host):
    with AhpClient(host.port, acme.tokens["member"]) as alice:
        session = alice.create_session()
        chat = alice.subscribe(session)["defaultChat"]
        alice.dispatch(chat, {"type": "chat/turnStarted", "turnId": "8f0f8a8e-7a35-4c42-9f1e-2f0c9a3d3b11",
                              "startedAt": "2026-01-01T00:00:00Z", "message": {"text": "hi", "origin": {"kind": "agent"}}})
        assert alice.action("chat/turnStarted", rejected=True)["rejectionReason"] == "Clients may send only user messages."

