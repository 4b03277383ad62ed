"""The built-in tool policy recipes, proven on the tool list the Copilot CLI actually sends its
model: a session names an agent definition whose `github-cli-builtin-tools` entry decides which
of the CLI's built-ins the model sees; the host's own tools are the chat's catalog snapshot."""
import asyncio
import os
import threading
from pathlib import Path

import pytest
from copilot import BUILTIN_TOOLS_ISOLATED
from django.conf import settings

from agents.harness import copilot_cli
from agents.models import HarnessConversation
from agents.providers.github_copilot import NO_RUNTIME
from agents.warm import WARM
from sandbox import identity
from sessions_app.models import ToolCall
from tools_app import prewarm
from tools_app.models import AgentDefinition

from ..ahp.protocol.harness import AhpClient, default_chat, set_config
from ..conftest import sandbox_home
from .model_server import ModelServer, Text, tool_result_text, use_tool
from .test_claude_provider import harness_pids, offered
from .test_github_copilot_turns import HARNESS_PROGRAM

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


def test_a_builtin_the_person_denies_does_not_run_and_the_model_reads_why(acme, host, model):
    AgentDefinition.objects.create(tenant=acme.tenant, name="sheller", provider="github-copilot", tools=[
        {"kind": BUILTIN, "available-tools": {"tools": ["bash"]}}])
    model.add(use_tool("bash", {"command": "touch denied-marker", "description": "make a file"}),
              tool_result_text("The shell said: "))
    with AhpClient(host.port, acme.tokens["member"]) as alice:
        session = alice.create_session(provider="github-copilot", config={"agentDefinition": "sheller"})
        chat = default_chat(alice, session)
        alice.subscribe(chat)
        turn = alice.start_turn(chat, "make a file")
        ready = alice.wait_for(lambda f: f.get("method") == "action" and "confirmationTitle" in f["params"]["action"],
                               timeout=90)["params"]["action"]
        assert ready["confirmationTitle"] == "Allow the agent to run `touch denied-marker`?"
        alice.dispatch(chat, {"type": "chat/toolCallConfirmed", "turnId": turn, "toolCallId": ready["toolCallId"],
                              "approved": False})
        reply = alice.reply_to(turn, timeout=90)
    assert reply.startswith("The shell said: ") and "The person did not allow bash." in reply
    assert not list(sandbox_home(session).rglob("denied-marker"))  # it never ran
    call = ToolCall.objects.get(id=ready["toolCallId"])
    assert (call.tool_name, call.status, call.result["error"]["message"]) == (
        "bash", "completed", "The person did not allow bash.")


def test_a_tenant_approving_all_lets_the_builtin_run_in_the_sandbox(acme, host, model):
    AgentDefinition.objects.create(tenant=acme.tenant, name="sheller", provider="github-copilot", tools=[
        {"kind": BUILTIN, "available-tools": {"tools": ["bash"]}}])
    set_config(host.port, acme.tokens["root"], agentConnections={"github-copilot": {"permissions": "approve-all"}})
    model.add(use_tool("bash", {"command": "touch allowed-marker && id -u", "description": "make a file"}),
              tool_result_text("The shell said: "))
    with AhpClient(host.port, acme.tokens["member"]) as alice:
        session = alice.create_session(provider="github-copilot", config={"agentDefinition": "sheller"})
        chat = default_chat(alice, session)
        alice.subscribe(chat)
        reply = alice.reply_to(alice.start_turn(chat, "make a file"), timeout=90)
    assert reply.startswith("The shell said: ")
    assert list(sandbox_home(session).rglob("allowed-marker"))  # in the sandbox's home
    if os.geteuid() == 0:  # as the sandbox's user, not the host's
        assert str(identity.existing_sandbox_user(session.rsplit("/", 1)[-1])) in reply


def test_the_clis_native_package_is_the_nodes_read_only_and_no_sandbox_home_holds_one(acme, host, model):
    AgentDefinition.objects.create(tenant=acme.tenant, name="sheller", provider="github-copilot", tools=[
        {"kind": BUILTIN, "available-tools": {"tools": ["bash"]}}])
    set_config(host.port, acme.tokens["root"], agentConnections={"github-copilot": {"permissions": "approve-all"}})
    command = 'ls "$COPILOT_PKG_CACHE_HOME/pkg"; touch "$COPILOT_PKG_CACHE_HOME/pkg/mine" 2>&1'
    model.add(use_tool("bash", {"command": command, "description": "look at the package"}),
              tool_result_text("The shell said: "))
    with AhpClient(host.port, acme.tokens["member"]) as alice:
        session = alice.create_session(provider="github-copilot", config={"agentDefinition": "sheller"})
        chat = default_chat(alice, session)
        alice.subscribe(chat)
        reply = alice.reply_to(alice.start_turn(chat, "look at the package"), timeout=90)
    assert reply.startswith("The shell said: linux-x64") and "Read-only file system" in reply
    home = sandbox_home(session)
    held = sum(path.lstat().st_size for path in home.rglob("*"))
    assert held < 5 * 1024 * 1024, f"the sandbox's home holds {held} bytes"
    assert not list(home.rglob(".extraction-complete"))


def test_an_empty_mode_agent_keeps_its_state_in_its_tenants_own_base_directory(acme, host, model):
    AgentDefinition.objects.create(tenant=acme.tenant, name="bare", provider="github-copilot", tools=[
        {"kind": BUILTIN, "client-mode": "empty", "available-tools": {"tools": ["view"]}}])
    model.add(Text("first"), Text("second"))
    with AhpClient(host.port, acme.tokens["member"]) as alice:
        session = alice.create_session(provider="github-copilot", config={"agentDefinition": "bare"})
        chat = default_chat(alice, session)
        alice.subscribe(chat)
        assert alice.reply_to(alice.start_turn(chat, "remember 17"), timeout=90) == "first"
        assert alice.reply_to(alice.start_turn(chat, "what was it?"), timeout=90) == "second"
    storage = Path(settings.AHP_WORKSPACE_ROOT) / ".homes" / f"copilot-tenant-{acme.tenant.id}"  # every node's
    conversation = HarnessConversation.objects.get(chat_id=chat.split("/")[-1]).conversation_id
    assert list(storage.rglob(f"*{conversation}*"))  # the CLI's session state is the tenant's
    assert not list(sandbox_home(session).rglob(f"*{conversation}*"))  # not the session's home
    assert "remember 17" in str(model.requests[-1].body["messages"])  # the second turn resumed from there


def test_a_first_turn_sent_while_the_pre_warm_still_awaits_runs_on_the_pre_warmed_cli(acme, host, model, monkeypatch):
    """The turn reaches its harness before the session's pre-warm has read anything: it waits for
    the pre-warmed CLI rather than starting a second one (two empty-mode CLIs on one tenant's base
    directory both exit with code 1)."""
    AgentDefinition.objects.create(tenant=acme.tenant, name="bare", provider="github-copilot", tools=[
        {"kind": BUILTIN, "client-mode": "empty", "available-tools": {"tools": ["view"]}}])
    model.add(Text("first"))
    asked, taken, take, settle = threading.Event(), [], WARM.take, prewarm.settle_listings

    async def take_recorded(*args):
        asked.set()
        taken.append(harness := await take(*args))
        return harness

    async def settle_once_the_turn_asked(session):
        await asyncio.get_running_loop().run_in_executor(None, asked.wait, 60)
        await settle(session)

    monkeypatch.setattr(WARM, "take", take_recorded)
    monkeypatch.setattr(prewarm, "settle_listings", settle_once_the_turn_asked)
    with AhpClient(host.port, acme.tokens["member"]) as alice:
        session = alice.create_session(provider="github-copilot", config={"agentDefinition": "bare"})
        chat = default_chat(alice, session)
        alice.subscribe(chat)
        assert alice.reply_to(alice.start_turn(chat, "hello"), timeout=90) == "first"
        assert len(taken) == 1 and taken[0] is not None  # the pre-warmed process answered
        assert len(harness_pids(session, HARNESS_PROGRAM)) == 1
        assert taken[0].alive() and WARM.warm[("github-copilot", chat.split("/")[-1])].harness is taken[0]
