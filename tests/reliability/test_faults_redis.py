"""Redis (the channel layer and broker) restarts while clients are mid-call: every socket is
told to reconnect, what was committed during the outage replays from the log, and every tool
call ends exactly once."""
import shutil
import time

import pytest
from django.conf import settings
from django.db import connection
from websockets.exceptions import ConnectionClosed

from sessions_app.models import ToolCall, Turn

from ..ahp.protocol.harness import AhpClient, RpcFailed, default_chat, set_config
from ..ahp.protocol.test_client_tools import announce, call_open_file, complete
from .fault_helpers import (
    PrivateRedis,
    assert_log_gap_free,
    close_code,
    completions_per_call,
    log_marks,
    start_daphne,
    wait_until,
)

pytestmark = [
    pytest.mark.e2e,  # a private Redis and daphne
    pytest.mark.skipif(
        not settings.REDIS_URL or connection.vendor != "postgresql" or not shutil.which("redis-server"),
        reason="restarting Redis needs the Redis/PostgreSQL run (REDIS_URL, DATABASE_URL) and a redis-server binary",
    ),
]

SERVICE_RESTART = 4012


def reconnect(port, token, client_id, last_seen, channels):
    client = AhpClient(port, token, client_id, initialize=False)
    return client, client.call("reconnect", {"channel": "ahp-root://", "clientId": client_id,
                                             "lastSeenServerSeq": last_seen, "subscriptions": channels})


def test_a_redis_restart_closes_sockets_to_reconnect_and_loses_no_call(acme, globex, transactional_db, tmp_path):
    redis = PrivateRedis(tmp_path)
    redis.start()
    port, daphne = start_daphne(tmp_path, REDIS_URL=redis.url)
    try:
        # acme's client answers after the restart; globex's call times out during the outage.
        set_config(port, acme.tokens["root"], clientToolTimeoutMs=60000)
        set_config(port, globex.tokens["root"], clientToolTimeoutMs=1000)
        alice, ide = AhpClient(port, acme.tokens["member"], "alice"), AhpClient(port, acme.tokens["member"], "ide")
        bob, tool = AhpClient(port, globex.tokens["member"], "bob"), AhpClient(port, globex.tokens["member"], "ide")
        session_a, session_b = alice.create_session(), bob.create_session()
        chat_a, chat_b = default_chat(alice, session_a), default_chat(bob, session_b)
        alice.subscribe(chat_a)
        bob.subscribe(chat_b)
        announce(ide, session_a)
        announce(tool, session_b)
        before = log_marks()
        turn_a, start_a = call_open_file(alice, chat_a)
        last_seen_ide = ide.action("session/inputNeededSet")["serverSeq"]
        last_seen_alice = alice.action("chat/toolCallReady", turnId=turn_a)["serverSeq"]
        turn_b, start_b = call_open_file(bob, chat_b)
        last_seen_bob = bob.action("chat/toolCallReady", turnId=turn_b)["serverSeq"]

        redis.kill()
        killed = time.monotonic()
        assert [close_code(c) for c in (alice, ide, bob, tool)] == [SERVICE_RESTART] * 4
        told_within = time.monotonic() - killed

        # A client arriving during the outage is told the same (perhaps after an error answer).
        early = AhpClient(port, acme.tokens["member"], "early", initialize=False)
        try:
            early.call("initialize", {"channel": "ahp-root://", "protocolVersions": ["1.0.0"], "clientId": "early"})
        except RpcFailed as failed:
            assert failed.code == -32603
        except ConnectionClosed as closed:
            assert closed.rcvd.code == SERVICE_RESTART
        else:
            raise AssertionError("initialize succeeded with the channel layer down")
        assert close_code(early) == SERVICE_RESTART

        # globex's call times out while Redis is down: committed, though nothing could be delivered.
        assert wait_until(lambda: Turn.objects.filter(id=turn_b, state="complete").exists(), seconds=10), \
            Turn.objects.filter(id=turn_b).values_list("state", "error", flat=False).first()
        assert redis.process.poll() is not None, "Redis came back before the timeout: the test proves nothing"
        redis.start()
        outage = time.monotonic() - killed

        bob, replay = reconnect(port, globex.tokens["member"], "bob", last_seen_bob, [chat_b])
        with bob:
            assert replay["type"] == "replay"
            kinds = [(a["action"]["type"], a["action"].get("toolCallId")) for a in replay["actions"]]
            assert kinds.count(("chat/toolCallComplete", start_b["toolCallId"])) == 1
            assert ("chat/turnComplete", None) in kinds
            done = next(a for a in replay["actions"] if a["action"]["type"] == "chat/toolCallComplete")
            assert done["action"]["result"]["error"]["message"] == "open_file got no answer from ide in 1 s"

        ide, replay = reconnect(port, acme.tokens["member"], "ide", last_seen_ide, [session_a])
        alice, _ = reconnect(port, acme.tokens["member"], "alice", last_seen_alice, [chat_a, session_a])
        with alice, ide:
            assert replay["type"] == "replay"
            complete(ide, chat_a, turn_a, start_a["toolCallId"], text="after the restart")
            assert alice.reply_to(turn_a) == "after the restart"
            complete(ide, chat_a, turn_a, start_a["toolCallId"], text="again")
            again = ide.action("chat/toolCallComplete", rejected=True, toolCallId=start_a["toolCallId"])
            assert again["rejectionReason"] == f"Tool call {start_a['toolCallId']} is already complete."
            # The host is whole again: a new turn on a reconnected socket runs end to end.
            assert alice.reply_to(alice.start_turn(chat_a, "still here")) == "still here"
        tool.close()
    finally:
        daphne.terminate()
        daphne.wait(10)
        redis.stop()

    assert not ToolCall.objects.filter(completed__isnull=True).exists()
    assert completions_per_call(before) == {start_a["toolCallId"]: 1, start_b["toolCallId"]: 1}
    assert ToolCall.objects.get(id=start_a["toolCallId"]).result["content"][0]["text"] == "after the restart"
    assert_log_gap_free(before)
    print(f"\nredis restart: sockets told to reconnect within {told_within:.2f}s, outage {outage:.1f}s")
