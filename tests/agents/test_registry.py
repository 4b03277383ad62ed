"""The agents registry: every provider it lists is in the root state, and a github-copilot
turn where its runtime is missing fails with the sentence that names what is missing."""
import pytest

from agents.harness import copilot_cli
from agents.providers.github_copilot import NO_RUNTIME
from agents.registry import PROVIDER_CLASSES, PROVIDERS

from ..ahp.protocol.harness import AhpClient, default_chat


def test_the_registry_is_built_from_its_listed_providers():
    assert list(PROVIDERS) == [cls.id for cls in PROVIDER_CLASSES] == ["echo", "acp", "github-copilot", "claude"]


def test_the_root_state_lists_every_agent_github_copilot_among_them(acme, host):
    with AhpClient(host.port, acme.tokens["member"]) as alice:
        agents = alice.subscribe("ahp-root://")["agents"]
    assert [a["provider"] for a in agents] == ["echo", "acp", "github-copilot", "claude"]
    assert agents[2] == {"provider": "github-copilot", "displayName": "GitHub Copilot",
                         "description": "The GitHub Copilot CLI, through its SDK.",
                         "models": [{"id": "github-copilot", "provider": "github-copilot", "name": "GitHub Copilot"}]}


@pytest.fixture
def no_copilot_runtime(monkeypatch):
    monkeypatch.setenv("COPILOT_CLI_PATH", "/nonexistent/copilot")


def test_without_the_copilot_cli_a_turn_on_github_copilot_fails_naming_it(acme, host, no_copilot_runtime):
    with AhpClient(host.port, acme.tokens["member"]) as alice:
        session = alice.create_session(provider="github-copilot")
        chat = default_chat(alice, session)
        alice.subscribe(chat)
        turn = alice.start_turn(chat, "hello")
        error = alice.action("chat/error", turnId=turn, timeout=30)["action"]["error"]
    assert error["message"] == f"Refused: {NO_RUNTIME}"
    assert NO_RUNTIME == ("The github-copilot agent cannot run on this host: the GitHub Copilot CLI (npm "
                          "@github/copilot) is not installed. Run `make harness` (npm, into var/harness) or set "
                          "COPILOT_CLI_PATH to its executable.")


def test_a_copilot_cli_path_that_is_not_a_program_is_missing_too(monkeypatch, tmp_path):
    program = tmp_path / "copilot"
    monkeypatch.setenv("COPILOT_CLI_PATH", str(program))
    program.write_text("#!/bin/sh\n")
    assert copilot_cli() is None
    program.chmod(0o755)
    assert copilot_cli() == str(program)
