"""Messages into a busy chat wait their turn; a free chat takes them at once."""
import threading

import pytest

from kernel.refusals import Refused
from sessions_app import actions
from sessions_app.models import Chat, PendingMessage
from tools_app.catalog.host_tools import PLUGINS
from tools_app.catalog.registry import Tool

from ..ahp.protocol.harness import AhpClient, default_chat


def test_a_message_to_a_free_chat_starts_a_turn(acme):
    session = actions.do_create_session(acme.principal("member"), "5d7e0f3a-52a4-4ad4-9a53-6f2f7b8e1c01")
    turn, pending = actions.do_send_message(acme.principal("member"), session.chats.get(), "hello")
    assert pending is None and turn.text == "hello" and turn.state == "active"


def test_a_message_to_a_busy_chat_is_queued_and_becomes_its_next_turn(acme, host):
    release = threading.Event()
    PLUGINS.set_tools([Tool("slow", executor=lambda call, args: release.wait(10) and "slow done")])
    try:
        with AhpClient(host.port, acme.tokens["member"]) as alice:
            chat_uri = default_chat(alice, alice.create_session())
            alice.subscribe(chat_uri)
            first = alice.start_turn(chat_uri, "/call slow {}")
            alice.action("chat/toolCallStart", turnId=first)
            chat = Chat.objects.get(id=chat_uri.split("/")[-1])
            turn, pending = actions.do_send_message(acme.principal("member"), chat, "queued hello")
            assert turn is None
            queued = alice.action("chat/pendingMessageSet")["action"]
            assert (queued["kind"], queued["message"]["text"]) == ("queued", "queued hello")
            assert alice.subscribe(chat_uri)["queuedMessages"][0]["id"] == str(pending.id)
            release.set()
            assert alice.reply_to(first) == "slow done"
            assert alice.action("chat/pendingMessageRemoved")["action"]["id"] == str(pending.id)
            started = alice.action("chat/turnStarted", queuedMessageId=str(pending.id))["action"]
            assert alice.reply_to(started["turnId"]) == "queued hello"
            assert PendingMessage.objects.get(pk=pending.pk).status == "delivered"
    finally:
        release.set()
        PLUGINS.set_tools([])


def test_a_guest_may_not_send_a_message(acme):
    session = actions.do_create_session(acme.principal("member"), "5d7e0f3a-52a4-4ad4-9a53-6f2f7b8e1c02")
    with pytest.raises(Refused) as refused:
        actions.do_send_message(acme.principal("guest"), session.chats.get(), "hi")
    assert refused.value.sentence == "acme-guest may not chat:send here"
