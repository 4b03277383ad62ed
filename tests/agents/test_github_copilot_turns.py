"""The `github-copilot` provider's turns: the real Copilot CLI, in the session's sandbox, on a BYOK
OpenAI Chat Completions endpoint (a scripted model), over a real socket."""
import pytest

from agents.harness import copilot_cli
from agents.providers.github_copilot import NO_RUNTIME
from sessions_app.models import ToolCall

from ..ahp.protocol.harness import AhpClient, default_chat
from ..ahp.protocol.test_client_tools import announce, complete
from .model_server import ModelServer, tool_result_text, use_tool
from .test_claude_provider import offered

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
    # Exactly the chat's snapshot under its catalog names, none of the CLI's built-ins.
    assert sorted(first.tool_names) == sorted(n.split("__", 2)[-1] for n in offered(chat))
    assert second.tool_results()[-1] == "42"
    assert third.tool_results()[-1] == "opened README.md"
    calls = list(ToolCall.objects.filter(turn_id=turn).order_by("created"))
    assert [(c.tool_name, c.source, c.contributor_client_id, c.status) for c in calls] == [
        ("add", "host", "", "completed"), ("open_file", "client", "ide", "completed")]
