"""The deferred title strategy (every session's unless configured): a chat with no title is named
after the message that starts its first turn, that message's first line cut at 50 characters (as
VS Code's chat names one), published as session/chatUpdated; the default chat names its session too
(session/titleChanged, root/sessionSummaryChanged). A title someone set is never replaced."""
import uuid

import pytest

from .harness import AhpClient, default_chat

ROOT = "ahp-root://"


@pytest.fixture
def member(acme, host):
    with AhpClient(host.port, acme.tokens["member"], "member-client") as client:
        yield client


def root_title_change(client, session):
    def matches(frame):
        params = frame.get("params", {})
        return (frame.get("method") == "root/sessionSummaryChanged" and params.get("session") == session
                and "title" in params["changes"])
    return client.wait_for(matches, describe=f"root/sessionSummaryChanged title of {session}")["params"]["changes"]


def test_the_default_chat_and_its_session_are_named_after_the_first_message(member):
    session = member.create_session()
    main = default_chat(member, session)
    member.subscribe(ROOT)
    member.subscribe(session)
    member.subscribe(main)
    turn = member.start_turn(main, "  Fix the login bug\nit fails on submit")
    assert member.action("session/titleChanged")["action"]["title"] == "Fix the login bug"
    updated = member.action("session/chatUpdated", chat=main)["action"]["changes"]
    assert (updated["title"], updated["status"]) == ("Fix the login bug", 8)
    changes = root_title_change(member, session)
    assert changes["title"] == "Fix the login bug"
    assert [c["title"] for c in changes["chats"]] == ["Fix the login bug"]
    member.reply_to(turn)
    # Named once: the next message leaves the title as it is.
    member.reply_to(member.start_turn(main, "Now the logout bug"))
    assert member.subscribe(session)["title"] == "Fix the login bug"
    assert member.subscribe(main)["title"] == "Fix the login bug"
    assert [c["title"] for c in member.subscribe(session)["chats"]] == ["Fix the login bug"]


def test_a_long_first_line_is_cut_at_fifty_characters_and_a_side_chat_names_only_itself(member):
    session = member.create_session()
    main = default_chat(member, session)
    side = f"ahp-chat:/{uuid.uuid4()}"
    assert member.call("createChat", {"channel": session, "chat": side}) is None
    member.subscribe(session)
    member.subscribe(side)
    text = "Explain why the nightly build of the payments service keeps timing out"
    member.reply_to(member.start_turn(side, text))
    assert member.action("session/chatUpdated", chat=side)["action"]["changes"]["title"] == (
        "Explain why the nightly build of the payments serv")
    assert len(text[:50]) == 50
    state = member.subscribe(session)
    assert {c["resource"]: c["title"] for c in state["chats"]} == {
        main: "", side: "Explain why the nightly build of the payments serv"}
    assert state["title"] == ""


def test_a_title_a_client_set_is_never_replaced(member):
    session = member.create_session()
    main = default_chat(member, session)
    member.subscribe(session)
    member.dispatch(session, {"type": "session/titleChanged", "title": "Chosen by the person"})
    member.action("session/titleChanged")
    member.subscribe(main)
    member.reply_to(member.start_turn(main, "Something else entirely"))
    state = member.subscribe(session)
    assert state["title"] == "Chosen by the person"
    assert [c["title"] for c in state["chats"]] == [""]
