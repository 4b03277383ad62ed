"""Claude Code's own built-ins under the session's agent definition's policy, on the real CLI
against a scripted model, over a real socket: offered as the policy says, each permission the
CLI asks for is an AHP tool confirmation, and the tenant may approve all instead."""
import pytest

from sessions_app.models import ToolCall
from tools_app.models import AgentDefinition

from ..ahp.protocol.harness import AhpClient, default_chat, set_config
from ..conftest import sandbox_home
from .model_server import tool_result_text, use_tool
from .test_claude_provider import needs_cli, offered

pytestmark = [pytest.mark.e2e, needs_cli]
BUILTIN = "github-cli-builtin-tools"


def shell_turn(host, acme, model, command, person=None):
    """A session on a definition offering Bash, whose model runs `command`: (session, chat, reply,
    the confirmation the person was asked, if any). `person(alice, chat, turn, ready)` answers it."""
    AgentDefinition.objects.create(tenant=acme.tenant, name="sheller", provider="claude", tools=[
        {"kind": BUILTIN, "available-tools": {"tools": ["Bash"]}}])
    model.add(use_tool("Bash", {"command": command, "description": "make a file"}),
              tool_result_text("The shell said: "))
    ready = None
    with AhpClient(host.port, acme.tokens["member"]) as alice:
        session = alice.create_session(provider="claude", config={"agentDefinition": "sheller"})
        chat = default_chat(alice, session)
        alice.subscribe(chat)
        turn = alice.start_turn(chat, "make a file")
        if person is not None:
            ready = alice.wait_for(lambda f: f.get("method") == "action"
                                   and "confirmationTitle" in f["params"]["action"], timeout=90)["params"]["action"]
            person(alice, chat, turn, ready)
        reply = alice.reply_to(turn, timeout=90)
    return session, chat, reply, ready


def deny(alice, chat, turn, ready):
    alice.dispatch(chat, {"type": "chat/toolCallConfirmed", "turnId": turn, "toolCallId": ready["toolCallId"],
                          "approved": False})


def test_a_builtin_the_policy_offers_asks_the_person_and_a_denial_reaches_the_model(acme, host, model):
    session, chat, reply, ready = shell_turn(host, acme, model, "touch denied-marker", person=deny)
    assert sorted(model.agent_requests()[0].tool_names) == sorted([*offered(chat), "Agent", "Bash"])
    assert ready["confirmationTitle"] == "Allow the agent to run `touch denied-marker`?"
    assert reply.startswith("The shell said: ") and "The person did not allow Bash." in reply
    assert not list(sandbox_home(session).rglob("denied-marker"))  # it never ran
    call = ToolCall.objects.get(id=ready["toolCallId"])
    assert (call.tool_name, call.status, call.result["error"]["message"]) == (
        "Bash", "completed", "The person did not allow Bash.")


def test_a_tenant_approving_all_lets_claudes_builtin_run_in_the_sandbox(acme, host, model):
    set_config(host.port, acme.tokens["root"], agentConnections={"claude": {"permissions": "approve-all"}})
    session, _, reply, _ = shell_turn(host, acme, model, "touch allowed-marker && echo made")
    assert reply == "The shell said: made"
    assert list(sandbox_home(session).rglob("allowed-marker"))  # in the sandbox's home
