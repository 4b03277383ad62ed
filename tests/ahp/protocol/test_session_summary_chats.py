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


def summary_changes(client, session):
    """Every root/sessionSummaryChanged of `session` up to the one saying its turn ended (all
    consumed), oldest first."""
    ended = client.wait_for(lambda f: f.get("method") == "root/sessionSummaryChanged"
                            and f["params"]["session"] == session
                            and f["params"]["changes"].get("status", 0) & 31 == 1, describe="the turn's end")
    frames = [f for f in client.notifications
              if f.get("method") == "root/sessionSummaryChanged" and f["params"]["session"] == session]
    for frame in frames:
        client.notifications.remove(frame)
    return [f["params"] for f in (*frames, ended)]


def test_renaming_a_chat_by_the_tool_publishes_the_whole_chat_catalogue(member):
    session = member.create_session()
    main = default_chat(member, session)
    side = f"ahp-chat:/{uuid.uuid4()}"
    member.call("createChat", {"channel": session, "chat": side})
    member.subscribe(ROOT)
    member.subscribe(main)
    # A first turn names the main chat (and the session) "hello"; the rename comes in a second.
    member.reply_to(member.start_turn(main, "hello"))
    summary_changes(member, session)
    command = f'/call rename_chat {{"chat": "{side}", "title": "Side work"}}'
    reply = member.reply_to(member.start_turn(main, command))
    assert '"title": "Side work"' in reply, reply
    frames = summary_changes(member, session)
    modified = [f["changes"].pop("modifiedAt") for f in frames]
    assert all(isinstance(m, str) for m in modified)
    catalogue = lambda side_title, status: {  # noqa: E731
        "chats": [{"resource": main, "title": "hello", "origin": {"kind": "user"}, "status": status},
                  {"resource": side, "title": side_title, "origin": {"kind": "user"}, "status": 1}],
        "defaultChat": main}
    assert frames == [
        {"channel": ROOT, "session": session, "changes": {"status": 8 | 32, **catalogue("", 8)}},  # 32: read
        {"channel": ROOT, "session": session, "changes": catalogue("Side work", 8)},
        {"channel": ROOT, "session": session, "changes": {"status": 1 | 32, **catalogue("Side work", 1)}},
    ]
    listed = next(s for s in member.call("listSessions", {"channel": ROOT})["items"] if s["resource"] == session)
    assert {k: listed[k] for k in ("chats", "defaultChat")} == catalogue("Side work", 1)


def test_renaming_the_default_chat_publishes_its_session_title_and_catalogue_in_one_change(member):
    session = member.create_session()
    main = default_chat(member, session)
    member.subscribe(ROOT)
    member.subscribe(main)
    reply = member.reply_to(member.start_turn(main, '/call rename_chat {"title": "Main work"}'))
    assert '"title": "Main work"' in reply, reply
    frames = summary_changes(member, session)
    for frame in frames:
        frame["changes"].pop("modifiedAt")
    first = '/call rename_chat {"title": "Main work"}'
    assert frames == [
        {"channel": ROOT, "session": session, "changes": {
            "status": 8 | 32, "title": first, "defaultChat": main,
            "chats": [{"resource": main, "title": first, "origin": {"kind": "user"}, "status": 8}]}},
        {"channel": ROOT, "session": session, "changes": {
            "title": "Main work", "defaultChat": main,
            "chats": [{"resource": main, "title": "Main work", "origin": {"kind": "user"}, "status": 8}]}},
        {"channel": ROOT, "session": session, "changes": {
            "status": 1 | 32, "defaultChat": main,
            "chats": [{"resource": main, "title": "Main work", "origin": {"kind": "user"}, "status": 1}]}},
    ]


def test_a_new_session_s_summary_carries_its_chat_catalogue_as_listed(member):
    member.subscribe(ROOT)
    session = member.create_session()
    added = member.notification("root/sessionAdded")
    main = default_chat(member, session)
    assert added == {"channel": ROOT, "summary": {
        "resource": session, "provider": "echo", "title": "", "status": 1 | 32, "createdAt": added["summary"]["createdAt"],
        "modifiedAt": added["summary"]["modifiedAt"], "workingDirectories": [],
        "chats": [{"resource": main, "title": "", "origin": {"kind": "user"}, "status": 1}], "defaultChat": main}}
    listed = next(s for s in member.call("listSessions", {"channel": ROOT})["items"] if s["resource"] == session)
    assert added["summary"] == listed


def catalogue_change(client, session):
    def matches(frame):
        params = frame.get("params", {})
        return (frame.get("method") == "root/sessionSummaryChanged" and params.get("session") == session
                and "chats" in params["changes"])
    return client.wait_for(matches, describe=f"the chats of {session}")["params"]["changes"]


def test_creating_archiving_or_disposing_a_chat_publishes_the_chat_catalogue(acme, member):
    from sessions_app import actions
    from sessions_app.models import Chat

    session = member.create_session()
    main = default_chat(member, session)
    member.subscribe(ROOT)
    side, other = f"ahp-chat:/{uuid.uuid4()}", f"ahp-chat:/{uuid.uuid4()}"
    member.call("createChat", {"channel": session, "chat": side})
    assert [c["resource"] for c in catalogue_change(member, session)["chats"]] == [main, side]
    member.call("createChat", {"channel": session, "chat": other})
    assert [c["resource"] for c in catalogue_change(member, session)["chats"]] == [main, side, other]
    member.call("disposeChat", {"channel": side})
    changes = catalogue_change(member, session)
    assert [c["resource"] for c in changes["chats"]] == [main, other] and changes["defaultChat"] == main
    # archive_chat (a tool) archives through the same action
    actions.do_archive_chat(acme.principal("member"), Chat.objects.get(id=other.removeprefix("ahp-chat:/")))
    assert [c["resource"] for c in catalogue_change(member, session)["chats"]] == [main]
