"""Tokens: revoking one ends its open connections at their next message; repeated failed
handshakes of one address and token prefix are slowed down, a good token never."""
import asyncio
import time

import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

from ahp.protocol import throttle
from grants.actions import do_revoke_token

from ..ahp.protocol.harness import AhpClient
from ..conftest import production_server

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
        answers = []
        # With a shared channel layer the revocation may close the socket before the request
        # goes out; either way the request gets no answer and the close says why.
        with pytest.raises(ConnectionClosed) as closed:
            alice.send({"jsonrpc": "2.0", "id": 99, "method": "subscribe", "params": {"channel": session}})
            while True:
                answers.append(alice.read(10))
        assert closed.value.rcvd.code == 4401
        assert [frame for frame in answers if frame.get("id") == 99] == []


def failed_handshake(port, token="ahp_0000000000000000_wrong", headers=None):
    started = time.monotonic()
    with pytest.raises(InvalidStatus):
        connect(f"ws://127.0.0.1:{port}/ahp?tkn={token}", additional_headers=headers, open_timeout=30)
    return time.monotonic() - started


def test_repeated_failed_handshakes_of_one_token_prefix_are_slowed_down(acme, host, handshakes):
    for _ in range(throttle.FREE_FAILURES):
        failed_handshake(host.port)
    assert failed_handshake(host.port) >= throttle.BASE_DELAY
    assert failed_handshake(host.port) >= 2 * throttle.BASE_DELAY


def test_the_throttle_counts_each_key_on_its_own_and_caps_the_wait(handshakes):
    async def failures_then_waits():
        for _ in range(throttle.FREE_FAILURES + 20):
            await handshakes.failed(("10.0.0.1", "ahp_0000000000000000"))
        return [await handshakes.wait(("10.0.0.2", "ahp_0000000000000000")),
                await handshakes.wait(("10.0.0.1", "ahp_1111111111111111"))]

    assert asyncio.run(failures_then_waits()) == [0.0, 0.0]
    assert handshakes.delay_for(throttle.FREE_FAILURES + 20) == throttle.MAX_DELAY
    assert handshakes.delay_for(throttle.FREE_FAILURES - 1) == 0.0


def test_the_embedded_throttle_remembers_at_most_its_cap_of_keys():
    handshakes = throttle.HandshakeThrottle()  # Redis forgets by expiry instead

    async def failures():
        for n in range(throttle.MAX_KEYS + 5):
            await handshakes.failed(("10.0.0.1", f"ahp_{n:016d}"))

    asyncio.run(failures())
    assert len(handshakes.failures) <= throttle.MAX_KEYS


def test_concurrent_handshakes_of_a_failing_key_queue_behind_each_other(handshakes):
    key = ("10.0.0.3", "ahp_0000000000000000")

    async def three_at_once():
        for _ in range(throttle.FREE_FAILURES):
            await handshakes.failed(key)
        return await asyncio.gather(*(handshakes.wait(key) for _ in range(3)))

    waits = sorted(asyncio.run(three_at_once()))
    assert waits[0] >= throttle.BASE_DELAY * 0.9
    assert waits[2] >= 3 * throttle.BASE_DELAY * 0.9


def test_the_key_shows_only_a_tokens_public_prefix():
    assert throttle.token_prefix("ahp_0123456789abcdef_s3cr3t") == "ahp_0123456789abcdef"
    assert throttle.token_prefix("not-a-token-at-all") == "not-a-to"
    assert throttle.token_prefix(None) == ""


@pytest.fixture
def server_behind_a_proxy(transactional_db):
    """The production server (daphne) told that 127.0.0.1 is its TLS-terminating proxy."""
    with production_server(AHP_TRUSTED_PROXIES="127.0.0.1/32") as port:
        yield port


def test_ten_failed_handshakes_from_one_address_never_slow_a_good_token(acme, host, handshakes):
    started = time.monotonic()
    for _ in range(10):
        failed_handshake(host.port)
    assert time.monotonic() - started >= 0.9 * 7 * throttle.BASE_DELAY * 4  # the guesser is slowed...
    started = time.monotonic()
    with AhpClient(host.port, acme.tokens["member"]) as client:  # ...a good token is not
        assert client.call("ping", PING) is None
    # The address's next failure would wait 4 s (the longest pause); the good token waits none of it
    # (however slow a loaded machine makes the handshake itself).
    assert time.monotonic() - started < throttle.HandshakeThrottle().delay_for(10)


def test_a_failure_held_longer_than_daphnes_own_handshake_timeout_still_gets_its_refusal(acme, host, handshakes,
                                                                                         monkeypatch):
    # daphne drops a handshake after 5 s without a word; the host's serving process allows
    # HANDSHAKE_SECONDS, so a guesser slowed for 6 s (the longest wait and a loaded machine's token
    # check) still learns it was refused.
    monkeypatch.setattr(handshakes, "delay_for", lambda count: 6.0 if count else 0.0)
    failed_handshake(host.port)
    assert failed_handshake(host.port) >= 6.0


def test_failed_handshakes_with_a_persons_key_id_never_slow_that_persons_good_token(acme, host, handshakes):
    guess = f"ahp_{acme.tokens['member'].split('_')[1]}_guessed"  # their public key id, a wrong secret
    failures = throttle.FREE_FAILURES + 4
    for _ in range(failures):
        failed_handshake(host.port, guess)
    owed = handshakes.delay_for(failures)  # what the next handshake of that key id would wait first: 4 s
    started = time.monotonic()
    with AhpClient(host.port, acme.tokens["member"]) as client:
        assert client.call("ping", PING) is None
    assert time.monotonic() - started < owed


@pytest.mark.e2e
def test_behind_a_trusted_proxy_each_forwarded_client_is_throttled_on_its_own(acme, server_behind_a_proxy):
    port = server_behind_a_proxy
    for _ in range(throttle.FREE_FAILURES + 3):
        failed_handshake(port, headers={"X-Forwarded-For": "203.0.113.7"})
    assert failed_handshake(port, headers={"X-Forwarded-For": "203.0.113.7"}) >= 8 * throttle.BASE_DELAY
    assert failed_handshake(port, headers={"X-Forwarded-For": "198.51.100.9, 127.0.0.1"}) < 4 * throttle.BASE_DELAY


@pytest.mark.e2e  # daphne's own peer, which uvicorn (trusting 127.0.0.1 by default) would not show
def test_a_forwarded_for_header_from_an_untrusted_peer_changes_nothing(acme, live_server_process):
    for _ in range(throttle.FREE_FAILURES + 3):
        failed_handshake(live_server_process, headers={"X-Forwarded-For": "203.0.113.7"})
    assert failed_handshake(live_server_process, headers={"X-Forwarded-For": "198.51.100.9"}) >= 8 * throttle.BASE_DELAY
