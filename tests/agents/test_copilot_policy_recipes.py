"""The built-in tool policy recipes, proven on the tool list the Copilot CLI actually sends its
model: a session names an agent definition whose `github-cli-builtin-tools` entry decides which
of the CLI's built-ins the model sees; the host's own tools are the chat's catalog snapshot."""
import pytest
from copilot import BUILTIN_TOOLS_ISOLATED

from agents.harness import copilot_cli
from agents.providers.github_copilot import NO_RUNTIME
from tools_app.models import AgentDefinition

from ..ahp.protocol.harness import AhpClient, default_chat
from .model_server import ModelServer, Text
from .test_claude_provider import offered

pytestmark = [pytest.mark.e2e,
              pytest.mark.skipif(copilot_cli() is None, reason=f"needs the Copilot CLI: {NO_RUNTIME}")]
BUILTIN = "github-cli-builtin-tools"


@pytest.fixture
def model(monkeypatch, settings):
    # An agent offered no tool at all still asks its model: no request is a side question here.
    with ModelServer(side=lambda request: False) as server:
        monkeypatch.setenv("AHP_COPILOT_BASE_URL", f"{server.url}/v1")
        monkeypatch.setenv("AHP_COPILOT_API_KEY", "test-key")
        settings.AHP_OUTBOUND_ALLOW = "127.0.0.1"
        yield server


def offered_to_model(host, acme, model, name, *entries):
    """The tools the CLI's first model request offered, in a session on definition `name`, and
    the host tools of that session's snapshot."""
    AgentDefinition.objects.create(tenant=acme.tenant, name=name, provider="github-copilot", tools=list(entries))
    model.add(Text("ok"))
    before = len(model.requests)
    with AhpClient(host.port, acme.tokens["member"]) as alice:
        session = alice.create_session(provider="github-copilot", config={"agentDefinition": name})
        chat = default_chat(alice, session)
        alice.subscribe(chat)
        assert alice.reply_to(alice.start_turn(chat, f"hello {name}"), timeout=90) == "ok"
    request = next(r for r in model.requests[before:] if f"hello {name}" in str(r.body["messages"]))
    return set(request.tool_names), {n.split("__", 2)[-1] for n in offered(chat)}


def test_without_a_policy_the_model_sees_the_builtins_and_the_host_tools(acme, host, model):
    seen, host_tools = offered_to_model(host, acme, model, "plain")
    assert host_tools <= seen
    assert {"view", "bash", "task"} <= seen - host_tools  # the CLI's own


def test_excluding_the_isolated_tools_removes_exactly_the_isolated_builtins(acme, host, model):
    plain, host_tools = offered_to_model(host, acme, model, "plain")
    isolated, _ = offered_to_model(host, acme, model, "isolated", {"kind": BUILTIN, "excluded-tools": {"isolated": True}})
    # list_agents is a host tool too: the host's, which overrides the built-in, stays.
    assert plain - isolated == (set(BUILTIN_TOOLS_ISOLATED) & plain) - host_tools != set()


def test_only_mcp_tools_leaves_the_model_no_builtin_and_no_host_tool(acme, host, model):
    seen, _ = offered_to_model(host, acme, model, "mcp-only", {"kind": BUILTIN, "available-tools": {"tools": ["mcp:*"]}})
    assert seen == set()  # the CLI has no MCP server of its own: the host's tools are custom tools


def test_naming_builtins_only_keeps_the_host_tools(acme, host, model):
    seen, host_tools = offered_to_model(host, acme, model, "viewer", {"kind": BUILTIN, "available-tools": {"tools": ["view"]}})
    assert seen == host_tools | {"view"}


def test_excluding_custom_tools_leaves_only_builtins(acme, host, model):
    seen, host_tools = offered_to_model(host, acme, model, "no-host", {"kind": BUILTIN, "excluded-tools": {"tools": ["custom:*"]}})
    assert host_tools == set() and seen and "view" in seen
