"""The `github-copilot` provider's turns: the real Copilot CLI, in the session's sandbox, on a BYOK
OpenAI Chat Completions endpoint (a scripted model), over a real socket."""
import os

import pytest

from agents.harness import copilot_cli
from agents.instructions import SET_WORKSPACE_HINT
from agents.providers.github_copilot import NO_RUNTIME
from sessions_app.models import ToolCall

from ..ahp.protocol.harness import AhpClient, default_chat
from ..ahp.protocol.test_client_tools import OPEN_FILE, announce, complete
from ..ahp.protocol.test_worker_chats import PICK
from ..tools_app.catalog.test_catalog_inputs import data_uri
from .model_server import ModelServer, Text, ToolUse, tool_result_text, use_tool
from .test_claude_provider import (
    cancel_a_turn_waiting_on_a_client_tool,
    harness_pids,
    offered,
    the_reply_streams_as_a_part_then_deltas,
)

HARNESS_PROGRAM = os.path.realpath(copilot_cli() or "copilot")
pytestmark = [pytest.mark.e2e,
              pytest.mark.skipif(copilot_cli() is None, reason=f"needs the Copilot CLI: {NO_RUNTIME}")]


@pytest.fixture
def model(monkeypatch, settings):
    with ModelServer() as server:
        monkeypatch.setenv("AHP_COPILOT_BASE_URL", f"{server.url}/v1")
        monkeypatch.setenv("AHP_COPILOT_API_KEY", "test-key")
        settings.AHP_OUTBOUND_ALLOW = "127.0.0.1"  # the scripted model is on loopback: allow-listed here only
        yield server


def test_a_copilot_turn_calls_a_host_tool_and_a_client_tool_and_reads_their_results(acme, host, host_tools, model):
    model.add(use_tool("add", {"a": 20, "b": 22}), use_tool("ide__open_file", {"path": "README.md"}),
              tool_result_text("Both done; the last said: "))
    with AhpClient(host.port, acme.tokens["member"], "alice") as alice, \
            AhpClient(host.port, acme.tokens["member"], "ide") as ide:
        session = alice.create_session(provider="github-copilot")
        chat = default_chat(alice, session)
        alice.subscribe(chat)
        announce(ide, session)
        turn = alice.start_turn(chat, "add, then open the readme")
        start = alice.action("chat/toolCallStart", turnId=turn, timeout=90)["action"]
        assert start["toolName"] == "add"
        request = ide.action("session/inputNeededSet", timeout=90)["action"]["request"]
        complete(ide, chat, turn, request["toolCall"]["toolCallId"], text="opened README.md")
        assert alice.reply_to(turn, timeout=90) == "Both done; the last said: opened README.md"

    first, second, third = model.agent_requests()
    # Exactly the chat's snapshot under its catalog names; of the CLI's built-ins only its sub-agent tool.
    assert sorted(first.tool_names) == sorted([*(n.split("__", 2)[-1] for n in offered(chat)), "task"])
    assert second.tool_results()[-1] == "42"
    assert third.tool_results()[-1] == "opened README.md"
    calls = list(ToolCall.objects.filter(turn_id=turn).order_by("created"))
    assert [(c.tool_name, c.source, c.contributor_client_id, c.status) for c in calls] == [
        ("add", "host", "", "completed"), ("open_file", "client", "ide", "completed")]


def test_cancelling_a_turn_aborts_copilot_whose_process_answers_the_next_turn(acme, host, model):
    cancel_a_turn_waiting_on_a_client_tool(acme, host, model, "github-copilot", HARNESS_PROGRAM, survives=True)


def test_two_turns_of_a_chat_go_to_one_copilot_process_holding_the_conversation(acme, host, model):
    model.add(Text("first answer"), Text("second answer"))
    with AhpClient(host.port, acme.tokens["member"]) as alice:
        session = alice.create_session(provider="github-copilot")
        chat = default_chat(alice, session)
        alice.subscribe(chat)
        assert alice.reply_to(alice.start_turn(chat, "remember 17"), timeout=90) == "first answer"
        first_pids = harness_pids(session, HARNESS_PROGRAM)
        assert len(first_pids) == 1  # still running between the turns
        assert alice.reply_to(alice.start_turn(chat, "what was it?"), timeout=90) == "second answer"
        assert harness_pids(session, HARNESS_PROGRAM) == first_pids
    second = model.agent_requests()[1]
    assert second.last_user_text().endswith("what was it?")
    assert "remember 17" in str(second.body["messages"]) and "first answer" in str(second.body["messages"])


def test_the_reply_streams_into_the_chat_as_a_part_then_deltas(acme, host, model):
    the_reply_streams_as_a_part_then_deltas(acme, host, model, "github-copilot")


def test_copilots_sub_agent_works_in_a_tool_origin_chat_without_user_chat_tools(acme, host, host_tools, model):
    task = {"agent_type": "worker", "name": "sum", "description": "Sum", "prompt": "add 2 and 3", "mode": "sync"}
    model.add(ToolUse("task", task), use_tool("add", {"a": 2, "b": 3}), tool_result_text("Sub-agent: "),
              tool_result_text("Parent heard: "))
    with AhpClient(host.port, acme.tokens["member"], "alice") as alice, \
            AhpClient(host.port, acme.tokens["member"], "ide") as ide:
        session = alice.create_session(provider="github-copilot")
        chat = default_chat(alice, session)
        alice.subscribe(chat)
        announce(ide, session, OPEN_FILE, PICK)
        turn = alice.start_turn(chat, "delegate the sum")
        task_call = alice.action("chat/toolCallStart", turnId=turn, timeout=90)["action"]
        reply = alice.reply_to(turn, timeout=90)
        worker = next(c for c in alice.subscribe(session)["chats"] if c["resource"] != chat)

    assert worker["origin"] == {"kind": "tool", "chat": chat, "toolCallId": task_call["toolCallId"]}
    assert (task_call["toolName"], task_call["displayName"]) == ("task", "Sum")
    assert reply.startswith("Parent heard: ") and "Sub-agent: 5" in reply
    parent, subagent, subagent_after, _ = model.agent_requests()
    assert "ide__pick" in parent.tool_names and "task" in parent.tool_names
    assert "add 2 and 3" in subagent.last_user_text()
    assert "ide__pick" not in subagent.tool_names and {"add", "ide__open_file"} <= set(subagent.tool_names)
    assert subagent_after.tool_results()[-1] == "5"
    worker_calls = ToolCall.objects.filter(turn__chat_id=worker["resource"].split("/")[-1])
    assert [(c.tool_name, c.status, c.result["success"]) for c in worker_calls] == [("add", "completed", True)]
    assert [(c.tool_name, c.status) for c in ToolCall.objects.filter(turn_id=turn)] == [("task", "completed")]


def test_copilot_is_told_the_tools_instructions_and_the_clients_rules(acme, host, model):
    rule = "---\nalwaysApply: true\n---\nAnswer in British English.\n"
    plugin = {"type": "plugin", "id": "style", "uri": "file:///home/dev/plugins/style", "name": "style",
              "enabled": True, "children": [{"type": "rule", "id": "r1", "name": "style.mdc", "uri": data_uri(rule),
                                             "alwaysApply": True}]}
    model.add(tool_result_text("Done: "))
    with AhpClient(host.port, acme.tokens["member"], "alice") as alice:
        session = alice.create_session(provider="github-copilot")
        chat = default_chat(alice, session)
        alice.subscribe(session)
        alice.subscribe(chat)
        alice.dispatch(session, {"type": "session/activeClientSet", "activeClient": {
            "clientId": alice.client_id, "tools": [], "customizations": [plugin]}})
        alice.action("session/activeClientSet")
        alice.reply_to(alice.start_turn(chat, "hello"), timeout=90)
    system = "\n".join(m["content"] if isinstance(m["content"], str) else "".join(c.get("text", "") for c in m["content"])
                       for m in model.agent_requests()[0].body["messages"] if m["role"] == "system")
    assert f"You are the agent of AHP session {session}, run by an AHP host." in system
    assert "Answer in British English." in system
    # The catalog's deferred tools are named, and a session without a folder is pointed at set_workspace.
    occasional = next(line for line in system.split("\n\n") if line.startswith("These tools are for occasional use"))
    assert "list_agents" in occasional and "move_session" in occasional and "list_sessions" not in occasional
    assert SET_WORKSPACE_HINT in system
