"""The `claude` provider: the real Claude Code CLI, in the session's sandbox, against a scripted
model, over a real socket. The model's tool list is what the CLI actually sent."""
import asyncio
import logging
import os
import signal
import threading
import time
from types import SimpleNamespace

import pytest

from agents import registry
from agents.harness import claude_cli
from agents.models import HarnessConversation
from agents.providers.claude import NO_CLI, OwnServers
from agents.warm import WARM
from sessions_app.models import Chat, ToolCall
from tools_app.catalog.loader import catalog_for_chat

from ..ahp.protocol.harness import AhpClient, default_chat, set_config
from ..ahp.protocol.test_client_tools import OPEN_FILE, announce, complete
from ..ahp.protocol.test_worker_chats import PICK
from ..tools_app.families.mcp_servers.test_configured_servers import listed
from .model_server import Hold, Text, ToolUse, tool_result_text, use_tool

needs_cli = pytest.mark.skipif(claude_cli() is None, reason=f"needs the Claude Code CLI: {NO_CLI}")
HARNESS_PROGRAM = os.path.realpath(claude_cli() or "claude")


def offered(chat_uri):
    """The chat's catalog snapshot under the names the model sees."""
    snapshot = catalog_for_chat(Chat.objects.get(id=chat_uri.split("/")[-1]))
    return sorted(f"mcp__client__{name}" if snapshot.bindings[name].client_id else f"mcp__host__{name}"
                  for name in snapshot.names)


@pytest.mark.e2e
@needs_cli
def test_a_claude_turn_calls_a_host_tool_and_a_client_tool_and_reads_their_results(acme, host, host_tools, model):
    model.add(use_tool("add", {"a": 20, "b": 22}), use_tool("ide__open_file", {"path": "README.md"}),
              tool_result_text("Both done; the last said: "))
    with AhpClient(host.port, acme.tokens["member"], "alice") as alice, \
            AhpClient(host.port, acme.tokens["member"], "ide") as ide:
        session = alice.create_session(provider="claude")
        chat = default_chat(alice, session)
        alice.subscribe(chat)
        announce(ide, session)
        turn = alice.start_turn(chat, "add, then open the readme")
        start = alice.action("chat/toolCallStart", turnId=turn, timeout=90)["action"]
        assert start["toolName"] == "add"
        request = ide.action("session/inputNeededSet", timeout=90)["action"]["request"]
        assert request["toolCall"]["toolName"] == "open_file"  # the name the client announced
        complete(ide, chat, turn, request["toolCall"]["toolCallId"], text="opened README.md")
        assert alice.reply_to(turn, timeout=90) == "Both done; the last said: opened README.md"

    first, second, third = model.agent_requests()
    # Exactly the chat's snapshot, and of the CLI's built-ins only its sub-agent tool.
    assert sorted(first.tool_names) == sorted([*offered(chat), "Agent"])
    assert {"mcp__host__add", "mcp__client__ide__open_file"} <= set(first.tool_names)
    assert first.last_user_text() == "add, then open the readme"
    assert second.tool_results() == ["42"]
    assert third.tool_results() == ["42", "opened README.md"]
    calls = list(ToolCall.objects.filter(turn_id=turn).order_by("created"))
    assert [(c.tool_name, c.source, c.contributor_client_id, c.status) for c in calls] == [
        ("add", "host", "", "completed"), ("open_file", "client", "ide", "completed")]


@pytest.mark.e2e
@needs_cli
def test_a_refused_call_reaches_the_model_as_the_refusal_sentence(acme, host, host_tools, model):
    model.add(use_tool("add", {"a": "twenty", "b": 22}), tool_result_text(), Text("second turn"))
    with AhpClient(host.port, acme.tokens["member"]) as alice:
        session = alice.create_session(provider="claude")
        chat = default_chat(alice, session)
        alice.subscribe(chat)
        reply = alice.reply_to(alice.start_turn(chat, "add badly"), timeout=90)
        assert reply == "The tool said: Invalid input for add at /a: 'twenty' is not of type 'number'"
        # The next turn resumes the same Claude conversation.
        assert alice.reply_to(alice.start_turn(chat, "and now?"), timeout=90) == "second turn"
    last = model.agent_requests()[-1]
    assert last.last_user_text() == "and now?"
    assert "add badly" in str(last.body["messages"])


def test_without_the_claude_cli_a_turn_fails_naming_what_to_install(acme, host, monkeypatch, tmp_path):
    monkeypatch.setenv("AHP_CLAUDE_CLI_PATH", str(tmp_path / "missing"))
    with AhpClient(host.port, acme.tokens["member"]) as alice:
        session = alice.create_session(provider="claude")
        chat = default_chat(alice, session)
        alice.subscribe(chat)
        turn = alice.start_turn(chat, "hello")
        error = alice.action("chat/error", turnId=turn, timeout=30)["action"]["error"]
    assert error["message"] == f"Refused: {NO_CLI}"
    assert NO_CLI == ("The claude agent cannot run on this host: the Claude Code CLI (npm @anthropic-ai/claude-code) "
                      "is not installed. Run `make harness` (npm, into var/harness) or set AHP_CLAUDE_CLI_PATH to "
                      "its executable.")


def harness_pids(session_uri, program=HARNESS_PROGRAM):
    """The harness processes (`program`) running in the session's sandbox (below its bwrap)."""
    session_id = session_uri.split("/")[-1]
    parents, commands = {}, {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    parents[int(entry)] = int(stat.read().rpartition(")")[2].split()[1])
                with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                    commands[int(entry)] = cmdline.read().decode(errors="replace")
            except OSError:
                continue

    def in_session(pid):
        while pid > 1:
            if "bwrap" in commands.get(pid, "") and session_id in commands.get(pid, ""):
                return True
            pid = parents.get(pid, 0)
        return False

    # A CLI's fork shows the CLI's command line until it execs what it starts: not a second CLI.
    return [pid for pid, command in commands.items() if command.startswith(program) and in_session(pid)
            and not commands.get(parents.get(pid, 0), "").startswith(program)]


def the_reply_streams_as_a_part_then_deltas(acme, host, model, provider):
    """A harness's reply reaches the chat as one part, then deltas, and the turn's end adds none."""
    model.add(Text("Hello from a streaming model"))
    with AhpClient(host.port, acme.tokens["member"]) as alice:
        chat = default_chat(alice, alice.create_session(provider=provider))
        alice.subscribe(chat)
        turn = alice.start_turn(chat, "hi")
        part = alice.action("chat/responsePart", turnId=turn, timeout=90)["action"]["part"]
        delta = alice.action("chat/delta", turnId=turn, timeout=30)["action"]
        alice.action("chat/turnComplete", turnId=turn, timeout=30)
        assert (part["content"], delta["partId"], delta["content"]) == ("Hello from a s", part["id"], "treaming model")
        # The turn's end added nothing the stream had not sent: no second reply part.
        assert not [f for f in alice.notifications if f.get("method") == "action"
                    and f["params"]["action"].get("turnId") == turn and f["params"]["action"]["type"] in (
                        "chat/responsePart", "chat/delta")]
        assert alice.subscribe(chat)["turns"][-1]["responseParts"] == [
            {"kind": "markdown", "id": part["id"], "content": "Hello from a streaming model"}]



def cancel_a_turn_waiting_on_a_client_tool(acme, host, model, provider, program, survives=False):
    """The harness calls a client tool; the person cancels instead of the client answering:
    the turn ends cancelled, the harness process is gone (or, `survives`, the same one is still
    there), and the next turn answers."""
    over = threading.Event()

    def by_prompt(request):
        # What the harness asks after the cancel waits (a process not interrupted stays alive).
        # Copilot heads a prompt with the time.
        if request.last_user_text().endswith("again"):
            return Text("answered after the cancel")
        over.wait(60)
        return Text("too late")

    model.add(use_tool("ide__open_file", {"path": "README.md"}), by_prompt, by_prompt)
    with AhpClient(host.port, acme.tokens["member"], "alice") as alice, \
            AhpClient(host.port, acme.tokens["member"], "ide") as ide:
        session = alice.create_session(provider=provider)
        chat = default_chat(alice, session)
        alice.subscribe(chat)
        announce(ide, session)
        turn = alice.start_turn(chat, "open the readme")
        ide.action("session/inputNeededSet", timeout=90)
        running = harness_pids(session, program)
        assert len(running) == 1
        alice.dispatch(chat, {"type": "chat/turnCancelled", "turnId": turn})
        alice.action("chat/turnCancelled", turnId=turn, timeout=30)
        deadline = time.monotonic() + 30
        while harness_pids(session, program) and time.monotonic() < deadline and not survives:
            time.sleep(0.1)
        assert harness_pids(session, program) == (running if survives else [])
        assert alice.subscribe(chat)["turns"][-1]["state"] == "cancelled"
        assert alice.reply_to(alice.start_turn(chat, "again"), timeout=90) == "answered after the cancel"
        over.set()
    call = ToolCall.objects.get(turn_id=turn)
    assert (call.status, call.result["error"]) == ("completed", {"message": "The turn was cancelled.", "code": "cancelled"})


@pytest.mark.e2e
@needs_cli
def test_a_killed_harness_fails_its_turn_with_a_sentence_and_the_next_turn_starts_it_again(acme, host, model):
    hold = Hold(Text("too late"))
    model.add(hold, Text("back again"))
    with AhpClient(host.port, acme.tokens["member"]) as alice:
        session = alice.create_session(provider="claude")
        chat = default_chat(alice, session)
        alice.subscribe(chat)
        turn = alice.start_turn(chat, "hello")
        assert hold.arrived.wait(90)
        pids = harness_pids(session)
        assert len(pids) == 1
        os.kill(pids[0], signal.SIGKILL)
        error = alice.action("chat/error", turnId=turn, timeout=60)["action"]["error"]
        hold.released.set()
        assert error["message"].startswith("HarnessStopped: The claude harness stopped before the turn ended (")
        assert "the next turn starts it again." in error["message"]
        assert alice.reply_to(alice.start_turn(chat, "again"), timeout=90) == "back again"


@pytest.mark.e2e
@needs_cli
def test_the_reply_streams_into_the_chat_as_a_part_then_deltas(acme, host, model):
    the_reply_streams_as_a_part_then_deltas(acme, host, model, "claude")

@pytest.mark.e2e
@needs_cli
def test_cancelling_a_turn_interrupts_claude_whose_process_answers_the_next_turn(acme, host, model):
    cancel_a_turn_waiting_on_a_client_tool(acme, host, model, "claude", HARNESS_PROGRAM, survives=True)


@pytest.mark.e2e
@needs_cli
def test_claudes_sub_agent_works_in_a_tool_origin_chat_without_user_chat_tools(acme, host, host_tools, model):
    task = {"description": "Sum", "prompt": "add 2 and 3", "subagent_type": "worker"}
    model.add(ToolUse("Agent", task), use_tool("add", {"a": 2, "b": 3}), tool_result_text("Sub-agent: "),
              tool_result_text("Parent heard: "))
    with AhpClient(host.port, acme.tokens["member"], "alice") as alice, \
            AhpClient(host.port, acme.tokens["member"], "ide") as ide:
        session = alice.create_session(provider="claude")
        chat = default_chat(alice, session)
        alice.subscribe(chat)
        announce(ide, session, OPEN_FILE, PICK)
        turn = alice.start_turn(chat, "delegate the sum")
        agent_call = alice.action("chat/toolCallStart", turnId=turn, timeout=90)["action"]
        reply = alice.reply_to(turn, timeout=90)
        worker = next(c for c in alice.subscribe(session)["chats"] if c["resource"] != chat)

    assert worker["origin"] == {"kind": "tool", "chat": chat, "toolCallId": agent_call["toolCallId"]}
    assert (agent_call["toolName"], agent_call["displayName"]) == ("Agent", "Sum")
    assert reply.startswith("Parent heard: ") and "Sub-agent: 5" in reply
    parent, subagent, subagent_after, _ = model.agent_requests()
    assert "mcp__client__ide__pick" in parent.tool_names
    assert subagent.last_user_text() == "add 2 and 3"
    assert "mcp__client__ide__pick" not in subagent.tool_names
    assert {"mcp__host__add", "mcp__client__ide__open_file"} <= set(subagent.tool_names)
    assert subagent_after.tool_results() == ["5"]
    # The sub-agent's call shows in its own chat; the parent's chat shows the Agent call, answered.
    worker_calls = ToolCall.objects.filter(turn__chat_id=worker["resource"].split("/")[-1])
    assert [(c.tool_name, c.status, c.result["success"]) for c in worker_calls] == [("add", "completed", True)]
    assert [(c.tool_name, c.status) for c in ToolCall.objects.filter(turn_id=turn)] == [("Agent", "completed")]
    assert "Sub-agent: 5" in worker_calls[0].turn.response_parts[-1]["content"]


@pytest.mark.e2e
@needs_cli
def test_a_turn_after_a_restart_resumes_the_chats_claude_conversation(acme, host, model):
    model.add(Text("first answer"), Text("second answer"))
    with AhpClient(host.port, acme.tokens["member"]) as alice:
        chat = default_chat(alice, alice.create_session(provider="claude"))
        alice.subscribe(chat)
        assert alice.reply_to(alice.start_turn(chat, "remember 17"), timeout=90) == "first answer"
        registry.build()  # the providers a restarted (or another) process has: nothing in memory
        asyncio.run_coroutine_threadsafe(WARM.stop_all(), WARM.loop).result(60)  # nor a warm harness
        assert alice.reply_to(alice.start_turn(chat, "what was it?"), timeout=90) == "second answer"
    first, second = model.agent_requests()
    assert second.last_user_text() == "what was it?"
    assert "remember 17" in str(second.body["messages"]) and "first answer" in str(second.body["messages"])
    conversation = HarnessConversation.objects.get(chat_id=chat.split("/")[-1])
    assert conversation.provider == "claude" and conversation.conversation_id


@pytest.mark.e2e
@needs_cli
def test_the_sessions_mcp_server_is_the_clis_own_and_its_calls_show_in_the_chat(acme, host, model, tiny_server):
    set_config(host.port, acme.tokens["root"], mcpServers={"tiny": {**tiny_server, "env": {"SUFFIX": "!"}}})
    model.add(use_tool("shout", {"text": "hi"}), tool_result_text())
    with AhpClient(host.port, acme.tokens["member"]) as alice:
        session = alice.create_session(provider="claude")
        listed(session, "tiny")
        chat = default_chat(alice, session)
        alice.subscribe(chat)
        turn = alice.start_turn(chat, "shout hi")
        start = alice.action("chat/toolCallStart", turnId=turn, timeout=90)["action"]
        # What the CLI handed its model: the server's structured answer.
        assert alice.reply_to(turn, timeout=90) == 'The tool said: {"result":"HI!"}'
    first = model.agent_requests()[0]
    # The CLI runs the server itself (in the sandbox): its tool under the CLI's name, not the host's.
    assert "mcp__tiny__shout" in first.tool_names and "mcp__host__tiny_shout" not in first.tool_names
    assert sorted(first.tool_names) == sorted(
        ["Agent", *(("mcp__tiny__shout" if n == "mcp__host__tiny_shout" else n) for n in offered(chat))])
    assert (start["toolName"], start["displayName"]) == ("tiny_shout", "shout")
    call = ToolCall.objects.get(turn_id=turn)
    assert (call.tool_name, call.source, call.status, call.result["content"]) == (
        "tiny_shout", "mcp", "completed", [{"type": "text", "text": '{"result":"HI!"}'}])


def test_a_stdio_server_set_to_run_outside_the_sessions_folder_is_left_out_and_logged(caplog):
    servers = {"there": {"type": "stdio", "command": "/bin/true", "cwd": "/elsewhere"},
               "here": {"type": "stdio", "command": "/bin/true", "cwd": "/work/s"},
               "host": {"type": "http", "url": "http://127.0.0.1:9/mcp"}}
    with caplog.at_level(logging.WARNING, logger="agents.providers.claude"):
        own = OwnServers(servers, "/work/s", SimpleNamespace(bindings={}), listed=())
    assert list(own.config) == ["here"]
    assert [r.getMessage() for r in caplog.records] == [
        'Left out MCP server "there": its cwd /elsewhere is not the session\'s folder /work/s.',
        'Left out MCP server "host": the name is one of the host\'s own servers.']
