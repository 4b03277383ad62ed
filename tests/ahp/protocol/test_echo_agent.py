"""The echo provider drives every tool path without a model, over a real socket."""
import pytest

from tools_app.catalog.host_tools import PLUGINS
from tools_app.catalog.registry import Tool

from .harness import AhpClient, default_chat

ADD = Tool(
    "add", description="Add two numbers",
    input_schema={"type": "object", "required": ["a", "b"],
                  "properties": {"a": {"type": "number"}, "b": {"type": "number"}}},
    executor=lambda call, args: str(args["a"] + args["b"]),
)


@pytest.fixture
def plugin_tools():
    PLUGINS.set_tools([ADD])
    yield
    PLUGINS.set_tools([])


def test_echo_echoes_other_text(acme, host):
    with AhpClient(host.port, acme.tokens["member"]) as alice:
        chat = default_chat(alice, alice.create_session())
        alice.subscribe(chat)
        turn = alice.start_turn(chat, "hello, host")
        started = alice.action("chat/turnStarted", turnId=turn)
        assert started["origin"]["clientId"] == "test-client"
        assert alice.reply_to(turn) == "hello, host"


def test_slash_tools_lists_the_tools_offered_in_this_chat(acme, host, plugin_tools):
    with AhpClient(host.port, acme.tokens["member"]) as alice:
        chat = default_chat(alice, alice.create_session())
        alice.subscribe(chat)
        assert "add" in alice.reply_to(alice.start_turn(chat, "/tools")).split("\n")


def test_slash_call_runs_a_host_tool_and_shows_the_call_in_the_chat(acme, host, plugin_tools):
    with AhpClient(host.port, acme.tokens["member"]) as alice:
        chat = default_chat(alice, alice.create_session())
        alice.subscribe(chat)
        turn = alice.start_turn(chat, '/call add {"a": 2, "b": 3}')
        start = alice.action("chat/toolCallStart", turnId=turn)["action"]
        assert start["toolName"] == "add" and "contributor" not in start
        ready = alice.action("chat/toolCallReady", toolCallId=start["toolCallId"])["action"]
        assert ready["confirmed"] == "not-needed"
        complete = alice.action("chat/toolCallComplete", toolCallId=start["toolCallId"])["action"]
        assert complete["result"]["success"] is True
        assert alice.reply_to(turn) == "5"
        completed = alice.subscribe(chat)["turns"][-1]
        assert completed["state"] == "complete"
        assert [p["kind"] for p in completed["responseParts"]] == ["toolCall", "markdown"]
        assert completed["responseParts"][0]["toolCall"]["status"] == "completed"


def test_a_refused_call_completes_failed_with_the_sentence_the_model_saw(acme, host, plugin_tools):
    with AhpClient(host.port, acme.tokens["member"]) as alice:
        chat = default_chat(alice, alice.create_session())
        alice.subscribe(chat)
        turn = alice.start_turn(chat, '/call nope {}\n/call add {"a": "x", "b": 1}')
        first = alice.action("chat/toolCallComplete", turnId=turn)["action"]["result"]
        assert first["success"] is False
        assert first["error"]["message"] == 'No tool named "nope" is available in this chat.'
        second = alice.action("chat/toolCallComplete", turnId=turn)["action"]["result"]
        assert second["error"]["message"] == "Invalid input for add at /a: 'x' is not of type 'number'"
        assert alice.reply_to(turn) == (
            'No tool named "nope" is available in this chat.\n'
            "Invalid input for add at /a: 'x' is not of type 'number'"
        )


def test_a_tool_that_raises_fails_the_call_not_the_turn(acme, host):
    def broken(call, args):
        raise RuntimeError("disk on fire")

    PLUGINS.set_tools([Tool("broken", executor=broken)])
    try:
        with AhpClient(host.port, acme.tokens["member"]) as alice:
            chat = default_chat(alice, alice.create_session())
            alice.subscribe(chat)
            turn = alice.start_turn(chat, "/call broken {}")
            assert alice.reply_to(turn) == "broken raised RuntimeError: disk on fire"
    finally:
        PLUGINS.set_tools([])


def test_a_second_turn_while_one_runs_is_rejected(acme, host):
    import threading

    release = threading.Event()
    PLUGINS.set_tools([Tool("slow", executor=lambda call, args: release.wait(10) and "done")])
    try:
        with AhpClient(host.port, acme.tokens["member"]) as alice:
            chat = default_chat(alice, alice.create_session())
            alice.subscribe(chat)
            first = alice.start_turn(chat, "/call slow {}")
            alice.action("chat/toolCallStart", turnId=first)
            second = alice.start_turn(chat, "again")
            rejected = alice.action("chat/turnStarted", rejected=True, turnId=second)
            assert rejected["rejectionReason"] == "A turn is already running in this chat."
            release.set()
            assert alice.reply_to(first) == "done"
    finally:
        release.set()
        PLUGINS.set_tools([])
