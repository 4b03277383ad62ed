"""PostgreSQL restarts under a running host: requests meanwhile fail with a clear error, and the
same process (and the same socket) serves again once the database is back, no restart needed."""
import glob
import json
import time
import urllib.error
import urllib.request

import pytest
from django.db import connection

from ..ahp.protocol.harness import AhpClient, RpcFailed, default_chat
from .fault_helpers import host_on_private_postgres

pytestmark = [
    pytest.mark.e2e,  # a private PostgreSQL and daphne
    pytest.mark.skipif(
        connection.vendor != "postgresql" or not glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        reason="restarting PostgreSQL needs the PostgreSQL run (DATABASE_URL) and its server binaries",
    ),
]

DATABASE_UNAVAILABLE = "Service unavailable: the host's database did not answer; try again shortly."


def health(port):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=10) as answer:
            return answer.status, json.load(answer)
    except urllib.error.HTTPError as failed:
        return failed.code, json.load(failed)


def listed_by_a_host_tool(client, chat):
    answer = client.reply_to(client.start_turn(chat, "/call list_sessions {}"))
    try:
        return [row["session"] for row in json.loads(answer)["sessions"]]
    except ValueError:
        raise AssertionError(f"list_sessions answered: {answer}") from None


def test_requests_during_a_database_restart_fail_clearly_and_the_host_recovers(acme, transactional_db, tmp_path):
    with host_on_private_postgres(tmp_path) as (cluster, port):
        with AhpClient(port, acme.tokens["member"], "alice") as alice:
            session = alice.create_session()
            chat = default_chat(alice, session)
            alice.subscribe(chat)
            assert alice.reply_to(alice.start_turn(chat, "before")) == "before"
            assert listed_by_a_host_tool(alice, chat) == [session]

            cluster.stop()
            stopped = time.monotonic()
            with pytest.raises(RpcFailed) as failed:
                alice.create_session()
            assert (failed.value.code, failed.value.message) == (-32603, DATABASE_UNAVAILABLE)
            with pytest.raises(RpcFailed) as failed:
                alice.call("listSessions", {"channel": "ahp-root://"})
            assert failed.value.message == DATABASE_UNAVAILABLE
            status, body = health(port)
            assert status == 503 and body["database"].startswith("error: ")
            assert alice.call("ping", {"channel": "ahp-root://"}) is None  # the socket itself lives on

            cluster.start()
            outage = time.monotonic() - stopped
            # The same process and socket serve again at once: no restart, no reconnect.
            assert health(port)[0] == 200
            again = alice.create_session()
            assert again != session
            assert alice.reply_to(alice.start_turn(chat, "after")) == "after"
            # A host tool runs on a thread of its own, whose connection died with the database too.
            assert sorted(listed_by_a_host_tool(alice, chat)) == sorted([session, again])
        with AhpClient(port, acme.tokens["member"], "bob") as bob:
            assert len(bob.call("listSessions", {"channel": "ahp-root://"})["items"]) == 2
    print(f"\npostgres restart: outage {outage:.1f}s; first request after it served")
