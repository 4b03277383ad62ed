"""Tokens: revoking one ends its open connections at their next message; repeated failed
handshakes from one address are slowed down."""
import asyncio
import time

import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

from ahp.protocol import throttle
from grants.actions import do_revoke_token

from ..protocol.harness import AhpClient

PING = {"channel": "ahp-root://"}


@pytest.fixture
def handshakes():
    throttle.HANDSHAKES.clear()
    yield throttle.HANDSHAKES
    throttle.HANDSHAKES.clear()


def closed_code(client):
    with pytest.raises(ConnectionClosed) as closed:
        client.call("ping", PING)
    return closed.value.rcvd.code


def test_revoking_a_token_closes_its_open_connection_on_the_next_message(acme, host):
    with AhpClient(host.port, acme.tokens["member"], "alice") as alice, \
            AhpClient(host.port, acme.tokens["admin"], "admin") as admin:
        assert alice.call("ping", PING) is None
        do_revoke_token(acme.tenant, "acme-member")
        assert closed_code(alice) == 4401
        assert admin.call("ping", PING) is None  # another token's connection carries on


def test_deactivating_a_person_closes_their_open_connection_on_the_next_message(acme, host):
    with AhpClient(host.port, acme.tokens["guest"], "gus") as gus:
        assert gus.call("ping", PING) is None
        acme.guest.is_active = False
        acme.guest.save()
        assert closed_code(gus) == 4401


def test_a_revoked_token_gets_no_answer_to_a_request_it_sends(acme, host):
    with AhpClient(host.port, acme.tokens["member"], "alice") as alice:
        session = alice.create_session()
        do_revoke_token(acme.tenant, "acme-member")
        alice.send({"jsonrpc": "2.0", "id": 99, "method": "subscribe", "params": {"channel": session}})
        with pytest.raises(ConnectionClosed):
            alice.read(10)


def failed_handshake(port):
    started = time.monotonic()
    with pytest.raises(InvalidStatus):
        connect(f"ws://127.0.0.1:{port}/ahp?tkn=ahp_0000000000000000_wrong")
    return time.monotonic() - started


def test_repeated_failed_handshakes_from_one_address_are_slowed_down(acme, host, handshakes):
    for _ in range(throttle.FREE_FAILURES):
        failed_handshake(host.port)
    assert failed_handshake(host.port) >= throttle.BASE_DELAY
    assert failed_handshake(host.port) >= 2 * throttle.BASE_DELAY
    # A good token from the same address waits too, so giving up early tells a guesser nothing.
    started = time.monotonic()
    with AhpClient(host.port, acme.tokens["member"]) as client:
        assert client.call("ping", PING) is None
    assert time.monotonic() - started >= 4 * throttle.BASE_DELAY


def test_the_throttle_counts_each_address_on_its_own_and_caps_the_wait(handshakes):
    for _ in range(throttle.FREE_FAILURES + 20):
        handshakes.failed("10.0.0.1")
    assert asyncio.run(handshakes.wait("10.0.0.2")) == 0.0
    assert handshakes.delay_for(throttle.FREE_FAILURES + 20) == throttle.MAX_DELAY
    assert handshakes.delay_for(throttle.FREE_FAILURES - 1) == 0.0


def test_concurrent_handshakes_from_a_failing_address_queue_behind_each_other(handshakes):
    for _ in range(throttle.FREE_FAILURES):
        handshakes.failed("10.0.0.3")

    async def three_at_once():
        return await asyncio.gather(*(handshakes.wait("10.0.0.3") for _ in range(3)))

    waits = sorted(asyncio.run(three_at_once()))
    assert waits[0] >= throttle.BASE_DELAY * 0.9
    assert waits[2] >= 3 * throttle.BASE_DELAY * 0.9
