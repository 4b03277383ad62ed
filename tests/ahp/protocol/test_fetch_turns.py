"""fetchTurns: a chat's older turns, a page at a time, newest page first, each oldest first."""
import uuid

import pytest

from .harness import AhpClient, RpcFailed, default_chat


@pytest.fixture
def member(acme, host):
    with AhpClient(host.port, acme.tokens["member"], "member-client") as client:
        yield client


def chat_with_turns(client, count):
    session = client.create_session()
    chat = default_chat(client, session)
    client.subscribe(chat)
    texts = [f"message {i}" for i in range(count)]
    turns = []
    for text in texts:
        turns.append(client.start_turn(chat, text))
        client.reply_to(turns[-1])
    return session, chat, turns


def test_it_pages_back_through_a_chats_turns(member):
    session, chat, turns = chat_with_turns(member, 5)
    newest = member.call("fetchTurns", {"channel": chat, "limit": 2})
    assert [t["id"] for t in newest["turns"]] == turns[3:] and newest["hasMore"] is True
    assert newest["turns"][0]["message"]["text"] == "message 3"
    assert newest["turns"][0]["responseParts"][0]["content"] == "message 3"
    older = member.call("fetchTurns", {"channel": chat, "before": turns[3], "limit": 2})
    assert [t["id"] for t in older["turns"]] == turns[1:3] and older["hasMore"] is True
    oldest = member.call("fetchTurns", {"channel": chat, "before": turns[1], "limit": 2})
    assert [t["id"] for t in oldest["turns"]] == turns[:1] and oldest["hasMore"] is False
    # A page is what the chat's snapshot holds of those turns; a session's channel means its default chat.
    assert member.call("fetchTurns", {"channel": session})["turns"] == member.subscribe(chat)["turns"]


@pytest.mark.parametrize("params, code, message", [
    ({"limit": 0}, -32602, "Invalid params: limit must be a positive number."),
    ({"limit": "5"}, -32602, "Invalid params: limit must be a positive number."),
    ({"before": 7}, -32602, "Invalid params: before must be a string."),
])
def test_bad_paging_is_refused(member, params, code, message):
    _, chat, _ = chat_with_turns(member, 1)
    with pytest.raises(RpcFailed) as failed:
        member.call("fetchTurns", {"channel": chat, **params})
    assert (failed.value.code, failed.value.message) == (code, message)


def test_a_before_that_is_not_a_turn_of_the_chat_is_refused(member):
    _, chat, _ = chat_with_turns(member, 1)
    _, other_chat, other_turns = chat_with_turns(member, 1)
    for before in (other_turns[0], "t1"):
        with pytest.raises(RpcFailed) as failed:
            member.call("fetchTurns", {"channel": chat, "before": before})
        assert (failed.value.code, failed.value.message) == (-32602, f"Invalid params: before is not a turn of {chat}.")


def test_another_tenants_chat_is_not_found_as_one_that_does_not_exist(globex, host, member):
    _, chat, _ = chat_with_turns(member, 1)
    nobody = f"ahp-chat:/{uuid.uuid4()}"
    with AhpClient(host.port, globex.tokens["root"], "intruder") as intruder:
        for uri in (chat, nobody):
            with pytest.raises(RpcFailed) as failed:
                intruder.call("fetchTurns", {"channel": uri})
            assert (failed.value.code, failed.value.message) == (-32008, f"No chat {uri} here.")
