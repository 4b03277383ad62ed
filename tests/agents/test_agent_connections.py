"""HostConfig's agentConnections: each tenant points its harnesses at its own model (credentials
read `<set>` and are kept when sent back) or picks one of the operator's ACP agents by name."""
import json
import sys

import pytest
from rest_framework.test import APIClient

from agents.providers.acp import no_such_agent
from sandbox.sealing import is_sealed, unseal
from tools_app.models import HostConfig

from ..ahp.protocol.harness import AhpClient, default_chat, set_config
from .model_server import ModelServer, Text
from .test_acp_provider import AGENT
from .test_claude_provider import needs_cli


def api(token):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


def test_credentials_read_set_are_sealed_and_kept_when_sent_back(acme):
    client = api(acme.tokens["root"])
    connections = {"claude": {"baseUrl": "https://models.example/", "apiKey": "sk-one", "model": "opus"},
                   "github-copilot": {"type": "openai", "baseUrl": "https://oai.example/v1", "apiKey": "sk-two"}}
    assert client.patch("/api/v1/config", {"agentConnections": connections}, format="json").status_code == 200
    shown = client.get("/api/v1/config").json()["agentConnections"]
    assert shown == {"claude": {"baseUrl": "https://models.example/", "apiKey": "<set>", "model": "opus"},
                     "github-copilot": {"type": "openai", "baseUrl": "https://oai.example/v1", "apiKey": "<set>"}}
    stored = HostConfig.for_tenant(acme.tenant).agent_connections
    assert is_sealed(stored["claude"]["apiKey"]) and unseal(stored["claude"]["apiKey"]) == "sk-one"
    shown["claude"]["model"] = "sonnet"
    client.patch("/api/v1/config", {"agentConnections": shown}, format="json")
    stored = HostConfig.for_tenant(acme.tenant).agent_connections
    assert unseal(stored["claude"]["apiKey"]) == "sk-one" and stored["claude"]["model"] == "sonnet"
    assert unseal(stored["github-copilot"]["apiKey"]) == "sk-two"


@pytest.mark.parametrize("value, sentence", [
    ({"claude": {"baseUrl": "ftp://models.example"}}, "agentConnections.claude.baseUrl must be an http or https URL."),
    ({"gemini": {}}, "agentConnections.gemini: no such provider; use one of claude, github-copilot, acp."),
    ({"github-copilot": {"wireApi": "grpc"}}, "agentConnections.github-copilot.wireApi must be 'completions' or "
                                              "'responses'."),
    ({"acp": {"command": "rm -rf /"}}, "agentConnections.acp.command: unknown field; use one of agent."),
])
def test_a_bad_connection_is_refused_naming_it(acme, value, sentence):
    response = api(acme.tokens["root"]).patch("/api/v1/config", {"agentConnections": value}, format="json")
    assert (response.status_code, response.json()) == (400, {"error": sentence})


@pytest.mark.e2e
@needs_cli
def test_a_tenants_connection_overrides_the_hosts_environment(acme, host, monkeypatch, settings):
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")  # the host default: nothing listens there
    settings.AHP_OUTBOUND_ALLOW = "127.0.0.1"
    with ModelServer(Text("from the tenant's model")) as model:
        set_config(host.port, acme.tokens["root"], agentConnections={"claude": {"baseUrl": model.url, "apiKey": "sk-t"}})
        with AhpClient(host.port, acme.tokens["member"]) as alice:
            chat = default_chat(alice, alice.create_session(provider="claude"))
            alice.subscribe(chat)
            assert alice.reply_to(alice.start_turn(chat, "hi"), timeout=90) == "from the tenant's model"


@pytest.fixture
def operator_agents(tmp_path, monkeypatch):
    script = tmp_path / "agent.py"
    script.write_text(AGENT)
    tmp_path.chmod(0o755)
    monkeypatch.setenv("AHP_ACP_AGENTS", json.dumps({"reporter": [sys.executable, str(script)]}))
    monkeypatch.setenv("AHP_ACP_AGENT_READ_ONLY_PATHS", f"{tmp_path}:{sys.prefix}")


def test_a_tenant_runs_the_operators_acp_agent_it_names(acme, host, operator_agents):
    set_config(host.port, acme.tokens["root"], agentConnections={"acp": {"agent": "reporter"}})
    with AhpClient(host.port, acme.tokens["member"]) as alice:
        chat = default_chat(alice, alice.create_session(provider="acp"))
        alice.subscribe(chat)
        assert json.loads(alice.reply_to(alice.start_turn(chat, "hello"), timeout=60))["blocks"][-1] == "hello"
    set_config(host.port, acme.tokens["root"], agentConnections={"acp": {"agent": "nobody"}})
    with AhpClient(host.port, acme.tokens["member"]) as alice:
        chat = default_chat(alice, alice.create_session(provider="acp"))
        alice.subscribe(chat)
        turn = alice.start_turn(chat, "hello")
        error = alice.action("chat/error", turnId=turn, timeout=30)["action"]["error"]
    assert error["message"] == f"Refused: {no_such_agent('nobody')}"
    assert no_such_agent("nobody") == ('The acp provider has no agent named "nobody": the operator defines them in '
                                       "AHP_ACP_AGENTS.")
