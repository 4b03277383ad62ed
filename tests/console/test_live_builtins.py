"""The operator allows a real Claude Code built-in from the live page in headless Chromium: the
CLI's own permission request for `Bash`, on the real CLI against a scripted model."""
import uuid

import pytest

from sessions_app.actions import do_create_session
from tools_app.models import AgentDefinition

from ..agents.model_server import tool_result_text, use_tool
from ..agents.test_claude_builtins import BUILTIN
from ..agents.test_claude_provider import needs_cli
from ..conftest import sandbox_home
from .test_browser_pages import until
from .test_live_steering import click, last_turn_state, open_live, send, text

pytestmark = [pytest.mark.e2e, needs_cli]
BASH = '.live-tool-call[data-tool="Bash"]'


def test_the_operator_allows_claudes_bash_and_the_command_runs(acme, host, operator, browser, model):
    AgentDefinition.objects.create(tenant=acme.tenant, name="sheller", provider="claude", tools=[
        {"kind": BUILTIN, "available-tools": {"tools": ["Bash"]}}])
    model.add(use_tool("Bash", {"command": "touch live-marker && echo made", "description": "make a file"}),
              tool_result_text("The shell said: "))
    session = do_create_session(acme.principal("admin"), uuid.uuid4(), provider="claude",
                                config={"agentDefinition": "sheller"})
    open_live(browser, host, operator, acme.tenant, session)
    send(browser, "make a file")
    until(browser, lambda: "pending-confirmation" in text(browser, BASH), timeout=90)
    assert text(browser, f"{BASH} .source") == "CLI built-in"
    assert text(browser, f"{BASH} .live-question") == "Allow the agent to run `touch live-marker && echo made`?"
    assert not list(sandbox_home(str(session.pk)).rglob("live-marker"))  # it waits for the person
    listed = f'#live-session-list li[data-session="{session.uri}"]'
    until(browser, lambda: "needs a person" in text(browser, listed))
    click(browser, f"{BASH} .live-allow")
    until(browser, lambda: last_turn_state(browser) == "complete", timeout=90)
    assert "completed (succeeded)" in text(browser, BASH) and not text(browser, ".live-allow, .live-deny")
    # The CLI runs its own built-in: the host records the person's answer, the model reads the output.
    assert text(browser, f"{BASH} .result") == "The person allowed Bash; the agent runs it."
    assert text(browser, ".live-turn:last-child .live-markdown") == "The shell said: made"
    assert model.agent_requests()[-1].tool_results() == ["made"]
    assert list(sandbox_home(str(session.pk)).rglob("live-marker"))  # in the sandbox's home
    until(browser, lambda: "needs a person" not in text(browser, listed))
