"""moveChat (a chat moves into another session of its tenant) and a fork's copied turns, over a
real socket: the exact result, what each side's subscribers hear, and every refusal's sentence."""
import uuid

import pytest

from .harness import AhpClient, RpcFailed, default_chat


@pytest.fixture
def member(acme, host):
    with AhpClient(host.port, acme.tokens["member"], "member-client") as client:
        yield client


def new_chat(client, session):
    chat = f"ahp-chat:/{uuid.uuid4()}"
    assert client.call("createChat", {"channel": session, "chat": chat}) is None
    return chat


def talk(client, chat, *texts):
    client.subscribe(chat)
    turns = []
    for text in texts:
        turns.append(client.start_turn(chat, text))
        client.reply_to(turns[-1])
    return turns


def move(client, chat, destination, request_id=None):
    return client.call("moveChat", {"channel": chat, "destination": {"kind": "chat", "chat": destination},
                                    "requestId": request_id or str(uuid.uuid4())})


def refusal(call):
    with pytest.raises(RpcFailed) as refused:
        call()
    return refused.value.code, refused.value.message


def test_a_chat_moves_to_another_session_and_both_sides_hear_it(acme, member, host):
    source, target = member.create_session(), member.create_session()
    chat = new_chat(member, source)
    talk(member, chat, "hello")
    target_default = default_chat(member, target)
    with AhpClient(host.port, acme.tokens["admin"], "watcher") as watcher:
        watcher.subscribe("ahp-root://")
        watcher.subscribe(source)
        watcher.subscribe(target)
        before = watcher.subscribe(chat)
        result = move(member, chat, target_default, "move-1")
        assert result == {"previousSession": source, "previousChat": chat, "session": target, "chat": chat,
                          "movedChats": [{"previousChat": chat, "chat": chat}]}
        removed = watcher.action("session/chatRemoved", chat=chat)
        assert removed["channel"] == source and removed["action"] == {"type": "session/chatRemoved", "chat": chat}
        added = watcher.action("session/chatAdded")
        assert added["channel"] == target and added["serverSeq"] == removed["serverSeq"] + 1
        summary = added["action"]["summary"]
        assert (summary["resource"], summary["origin"], summary["status"]) == (chat, {"kind": "user"}, 1)
        moved = watcher.notification("chat/moved")
        assert moved == {"channel": chat, **result}
        summaries = {}
        for _ in range(2):
            changed = watcher.notification("root/sessionSummaryChanged")
            summaries[changed["session"]] = changed["changes"]
        assert [c["resource"] for c in summaries[source]["chats"]] == [default_chat(member, source)]
        assert [c["resource"] for c in summaries[target]["chats"]] == [target_default, chat]
        assert summaries[target]["defaultChat"] == target_default
    # Fresh snapshots agree: the chat is the target's, with its turns; the source no longer lists it.
    assert [c["resource"] for c in member.subscribe(source)["chats"]] == [default_chat(member, source)]
    assert [c["resource"] for c in member.subscribe(target)["chats"]] == [target_default, chat]
    assert member.subscribe(chat)["turns"] == before["turns"]
    # A retry of the same request answers the same result and moves nothing; the key reused for
    # another move is refused.
    assert move(member, chat, target_default, "move-1") == result
    other = new_chat(member, source)
    assert refusal(lambda: move(member, other, target_default, "move-1")) == (
        -32602, "requestId move-1 already names another move; send a new requestId.")
    # The moved chat works in its new session.
    assert talk(member, chat, "again")


def test_move_refusals_are_sentences(acme, member, host):
    source, target = member.create_session(), member.create_session()
    chat = new_chat(member, source)
    source_default, target_default = default_chat(member, source), default_chat(member, target)
    assert refusal(lambda: move(member, source_default, target_default)) == (
        -32602, "A session's default chat moves only with its session; move the session instead.")
    assert refusal(lambda: move(member, chat, chat)) == (-32602, "A chat cannot move under itself.")
    assert refusal(lambda: move(member, chat, source_default)) == (
        -32602, "The chat is already in that session; this host keeps no chat hierarchy to move it in.")
    missing = f"ahp-chat:/{uuid.uuid4()}"
    assert refusal(lambda: move(member, chat, missing)) == (-32008, f"No chat {missing} here.")
    assert refusal(lambda: member.call("moveChat", {"channel": chat, "destination": {"kind": "newSession"},
                                                    "requestId": "r"})) == (
        -32602, "moveChat to a new session is not offered here: create the session, then move the chat to its "
                "default chat.")
    assert refusal(lambda: member.call("moveChat", {"channel": chat, "destination": {"kind": "chat"},
                                                    "requestId": "r"})) == (
        -32602, 'Invalid params: destination must be {kind: "chat", chat} or {kind: "newSession"}.')
    assert refusal(lambda: member.call("moveChat", {"channel": chat, "destination": {"kind": "chat",
                                                                                     "chat": target_default}})) == (
        -32602, "Invalid params: requestId is required.")
    with AhpClient(host.port, acme.tokens["guest"], "guest") as guest:  # may read both, write neither
        assert refusal(lambda: move(guest, chat, target_default)) == (-32009, "acme-guest may not chat:move here")
    # Nothing moved.
    assert chat in [c["resource"] for c in member.subscribe(source)["chats"]]
    assert [c["resource"] for c in member.subscribe(target)["chats"]] == [target_default]


def test_an_outsider_cannot_move_a_chat_nor_move_one_into_another_tenant(acme, globex, member, host):
    source, target = member.create_session(), member.create_session()
    chat = new_chat(member, source)
    target_default = default_chat(member, target)
    with AhpClient(host.port, globex.tokens["member"], "outsider") as outsider:
        assert refusal(lambda: move(outsider, chat, target_default)) == (-32008, f"No chat {chat} here.")
        theirs = outsider.create_session()
        their_chat = new_chat(outsider, theirs)
        assert refusal(lambda: move(outsider, their_chat, target_default)) == (
            -32008, f"No chat {target_default} here.")
        their_default = default_chat(outsider, theirs)
    assert refusal(lambda: move(member, chat, their_default)) == (-32008, f"No chat {their_default} here.")
    assert chat in [c["resource"] for c in member.subscribe(source)["chats"]]


def test_moves_turned_off_are_refused(acme, member, host):
    from .harness import set_config

    source, target = member.create_session(), member.create_session()
    chat = new_chat(member, source)
    set_config(host.port, acme.tokens["root"], **{"chatMoves.enabled": False})
    assert refusal(lambda: move(member, chat, default_chat(member, target))) == (
        -32011, "Moving chats and sessions is turned off (chatMoves.enabled is false).")


def test_a_fork_copies_the_turns_through_its_fork_point(member):
    session = member.create_session()
    source = default_chat(member, session)
    first, second, _ = talk(member, source, "one", "two", "three")
    fork = f"ahp-chat:/{uuid.uuid4()}"
    assert member.call("createChat", {"channel": session, "chat": fork,
                                      "source": {"kind": "fork", "chat": source, "turnId": second}}) is None
    original = member.subscribe(source)["turns"]
    copied = member.subscribe(fork)
    assert copied["origin"] == {"kind": "fork", "chat": source, "turnId": second}
    assert [t["message"]["text"] for t in copied["turns"]] == ["one", "two"]
    assert {t["id"] for t in copied["turns"]}.isdisjoint({first, second})
    assert [{k: v for k, v in t.items() if k != "id"} for t in copied["turns"]] == [
        {k: v for k, v in t.items() if k != "id"} for t in original[:2]]
    assert member.call("fetchTurns", {"channel": fork})["turns"] == copied["turns"]
    # The fork goes on from there on its own; the source keeps its three.
    assert talk(member, fork, "four")
    assert len(member.subscribe(source)["turns"]) == 3
    # A side chat copies nothing.
    side = f"ahp-chat:/{uuid.uuid4()}"
    member.call("createChat", {"channel": session, "chat": side,
                               "source": {"kind": "sideChat", "chat": source, "turnId": first}})
    assert member.subscribe(side)["turns"] == []


def test_a_fork_needs_an_ended_turn_of_its_source(member):
    session = member.create_session()
    source = default_chat(member, session)
    bogus = str(uuid.uuid4())
    fork = f"ahp-chat:/{uuid.uuid4()}"
    assert refusal(lambda: member.call("createChat", {"channel": session, "chat": fork, "source": {
        "kind": "fork", "chat": source, "turnId": bogus}})) == (
        -32602, f"Invalid params: source.turnId {bogus} is not an ended turn of {source}.")
    assert fork not in [c["resource"] for c in member.subscribe(session)["chats"]]


def test_a_forked_session_starts_with_its_sources_turns_through_the_fork_point(acme, globex, host, member):
    source = member.create_session(config={"model": "echo-1"})
    source_chat = new_chat(member, source)
    first, _ = talk(member, source_chat, "one", "two")
    forked = f"ahp-session:/{uuid.uuid4()}"
    assert member.call("createSession", {"channel": forked, "provider": "ignored",
                                         "fork": {"session": source, "turnId": first}}) is None
    state = member.subscribe(forked)
    assert (state["provider"], state["config"]["values"]["model"]) == ("echo", "echo-1")
    turns = member.subscribe(state["defaultChat"])["turns"]
    assert [t["message"]["text"] for t in turns] == ["one"] and turns[0]["id"] != first
    bogus = str(uuid.uuid4())
    again = f"ahp-session:/{uuid.uuid4()}"
    assert refusal(lambda: member.call("createSession", {"channel": again, "fork": {"session": source,
                                                                                    "turnId": bogus}})) == (
        -32602, f"Invalid params: fork.turnId {bogus} is not an ended turn of {source}.")
    assert again not in [s["resource"] for s in member.call("listSessions", {"channel": "ahp-root://"})["items"]]
    with AhpClient(host.port, globex.tokens["admin"], "outsider") as outsider:
        assert refusal(lambda: outsider.call("createSession", {"channel": again, "fork": {
            "session": source, "turnId": first}})) == (-32008, f"No session {source} here.")
