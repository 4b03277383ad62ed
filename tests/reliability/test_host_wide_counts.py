"""What is counted per person or per key is counted host-wide: on Redis across every node (two
serving processes stand for two nodes here), embedded across the front's serving processes."""
import os
import signal
import time

import pytest
from django.conf import settings
from websockets.exceptions import ConnectionClosed

from ahp.protocol import throttle
from sessions_app import quotas

from ..ahp.protocol.harness import AhpClient
from ..conftest import production_server
from ..sessions_app.test_quotas import CONNECTIONS_FULL, closed_with
from ..test_front import connected, front
from .test_security_tokens import failed_handshake

pytestmark = pytest.mark.e2e  # serving processes

PING = {"channel": "ahp-root://"}
on_redis = pytest.mark.skipif(not settings.REDIS_URL, reason="nodes share counts through Redis (REDIS_URL)")


@pytest.fixture
def handshakes():
    throttle.HANDSHAKES.clear()
    yield
    throttle.HANDSHAKES.clear()


@on_redis
def test_a_persons_connection_quota_is_reached_across_two_nodes(transactional_db, acme):
    member = acme.tokens["member"]
    with production_server(AHP_MAX_CONNECTIONS_PER_PERSON="2") as one, \
            production_server(AHP_MAX_CONNECTIONS_PER_PERSON="2") as two:
        with AhpClient(one, member, "one"), AhpClient(two, member, "two"):
            assert closed_with(one, member) == (4429, CONNECTIONS_FULL)
            assert closed_with(two, member) == (4429, CONNECTIONS_FULL)
            with AhpClient(two, acme.tokens["admin"], "admin") as admin:  # another person's places are their own
                assert admin.call("ping", PING) is None
        with AhpClient(two, member, "three") as third, AhpClient(two, member, "four"):  # closed sockets free theirs
            assert third.call("ping", PING) is None


@on_redis
def test_the_places_of_a_node_that_died_lapse(transactional_db, acme):
    member = acme.tokens["member"]
    with production_server(AHP_MAX_CONNECTIONS_PER_PERSON="1", AHP_HEARTBEAT_SECONDS="1") as two:
        with production_server(AHP_MAX_CONNECTIONS_PER_PERSON="1", AHP_HEARTBEAT_SECONDS="1") as one:
            held = AhpClient(one, member, "held")
            assert closed_with(two, member) == (4429, quotas.too_many_connections(1))
            node = [pid for pid in map(int, filter(str.isdigit, os.listdir("/proc"))) if serves(pid, one)]
            os.kill(node[0], signal.SIGKILL)  # a node dies with its socket open: nothing frees its place
        deadline = time.monotonic() + 30
        while refused(two, member) and time.monotonic() < deadline:  # its place lapses in 3 heartbeats
            time.sleep(0.5)
        with AhpClient(two, member, "again") as again:
            assert again.call("ping", PING) is None
        held.close()


def refused(port, token):
    client = AhpClient(port, token, initialize=False)
    try:
        client.call("ping", PING)
        return False
    except ConnectionClosed:
        return True
    finally:
        client.close()


def serves(pid, port):
    try:
        with open(f"/proc/{pid}/cmdline") as cmdline:
            return f"\0-p\0{port}\0" in cmdline.read()
    except OSError:
        return False


@on_redis
def test_failed_handshakes_through_one_node_slow_the_next_through_another(transactional_db, acme, handshakes):
    with production_server() as one, production_server() as two:
        for _ in range(throttle.FREE_FAILURES):
            assert failed_handshake(one) < throttle.BASE_DELAY * 4  # free
        assert failed_handshake(two) >= throttle.BASE_DELAY


def test_failed_handshakes_of_one_key_are_counted_by_one_of_the_fronts_processes(transactional_db, acme, tmp_path,
                                                                                  handshakes):
    with front(tmp_path / "front.log", processes=2) as (port, _):
        connected(port, acme.tokens["admin"]).close()  # the serving processes are up
        for _ in range(throttle.FREE_FAILURES):
            failed_handshake(port)
        assert failed_handshake(port) >= throttle.BASE_DELAY
        assert failed_handshake(port) >= 2 * throttle.BASE_DELAY
