"""root/sessionSummaryChanged carries the session's chat catalogue whenever a chat's status moves
(1.x: a status change in session/chatUpdated is projected into SessionSummary.chats, and a
`chats` in `changes` replaces the client's whole catalogue)."""
import uuid

import pytest

from .harness import AhpClient, default_chat

ROOT = "ahp-root://"


@pytest.fixture
def member(acme, host):
    with AhpClient(host.port, acme.tokens["member"], "member-client") as client:
        yield client


def summary_change(client, session, status_bit):
    def matches(frame):
        params = frame.get("params", {})
        return (frame.get("method") == "root/sessionSummaryChanged" and params.get("session") == session
                and params["changes"].get("status", 0) & status_bit and "chats" in params["changes"])
    return client.wait_for(matches, describe=f"root/sessionSummaryChanged of {session}")["params"]["changes"]


def test_a_chat_s_status_change_publishes_the_whole_chat_catalogue(member):
    session = member.create_session()
    main = default_chat(member, session)
    side = f"ahp-chat:/{uuid.uuid4()}"
    assert member.call("createChat", {"channel": session, "chat": side}) is None
    member.subscribe(ROOT)
    member.subscribe(side)
    turn = member.start_turn(side, "hello")
    started = summary_change(member, session, 8)
    assert started["chats"] == [
        {"resource": main, "title": "", "origin": {"kind": "user"}, "status": 1},
        {"resource": side, "title": "hello", "origin": {"kind": "user"}, "status": 8},
    ]
    assert started["defaultChat"] == main
    assert member.reply_to(turn) == "hello"
    ended = summary_change(member, session, 1)
    assert [c["status"] for c in ended["chats"]] == [1, 1] and ended["defaultChat"] == main
    # The catalogue is the session channel's, cut to SessionChatSummary's fields.
    snapshot = member.subscribe(session)
    assert ended["chats"] == [{k: c[k] for k in ("resource", "title", "origin", "status")} for c in snapshot["chats"]]
