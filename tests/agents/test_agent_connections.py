"""HostConfig's agentConnections: each tenant points its harnesses at its own model (credentials
read `<set>` and are kept when sent back) or picks one of the operator's ACP agents by name."""
import json
import os
import sys

import pytest
from rest_framework.test import APIClient

from agents.harness import copilot_cli
from agents.providers.acp import no_such_agent
from agents.providers.github_copilot import NO_RUNTIME
from sandbox import identity
from sandbox.bubblewrap import sandbox_root
from sandbox.sealing import is_sealed, unseal
from tools_app.agent_connections import OWN_KEY_NEEDED
from tools_app.models import HostConfig

from ..ahp.protocol.harness import AhpClient, default_chat, set_config
from ..conftest import sandbox_home
from .model_server import Hold, ModelServer, Text
from .test_acp_provider import AGENT
from .test_claude_provider import needs_cli

needs_copilot = pytest.mark.skipif(copilot_cli() is None, reason=f"needs the Copilot CLI: {NO_RUNTIME}")


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


HOST_KEY = "sk-host-wide-secret"


@pytest.fixture
def host_keys(monkeypatch):
    """The host's own endpoints (nothing listens there) and keys, from its environment."""
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("ANTHROPIC_API_KEY", HOST_KEY)
    monkeypatch.setenv("AHP_COPILOT_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("AHP_COPILOT_API_KEY", HOST_KEY)


@pytest.mark.parametrize("provider, base_url", [("claude", "https://models.example/"),
                                                ("github-copilot", "https://oai.example/v1")])
def test_a_tenant_endpoint_without_its_own_key_is_refused(acme, host_keys, provider, base_url):
    client = api(acme.tokens["root"])
    for entry in ({"baseUrl": base_url}, {"baseUrl": base_url, "apiKey": ""}, {"baseUrl": base_url, "apiKey": "<set>"}):
        response = client.patch("/api/v1/config", {"agentConnections": {provider: entry}}, format="json")
        assert (response.status_code, response.json()) == (400, {"error": OWN_KEY_NEEDED})
    assert HostConfig.for_tenant(acme.tenant).agent_connections is None
    assert OWN_KEY_NEEDED == (
        "A model endpoint of the tenant's own needs a key of its own: set apiKey (github-copilot: apiKey or "
        "githubToken) beside a baseUrl that is not the host's; the host's keys go only to the host's endpoints.")


def test_the_hosts_own_endpoint_or_a_tenants_own_key_is_accepted(acme, host_keys):
    client = api(acme.tokens["root"])
    for connections in ({"claude": {"baseUrl": "http://127.0.0.1:9/", "model": "opus"}},  # the host's endpoint
                        {"claude": {"baseUrl": "https://models.example/", "apiKey": "sk-t"}},
                        {"github-copilot": {"baseUrl": "https://oai.example/v1", "githubToken": "ghp-t"}},
                        {"github-copilot": {"githubToken": "ghp-t"}}):  # GitHub's models
        assert client.patch("/api/v1/config", {"agentConnections": connections}, format="json").status_code == 200
    # Stored, the key reads "<set>" and, sent back with another endpoint, still counts as the tenant's own.
    client.patch("/api/v1/config", {"agentConnections": {"claude": {"baseUrl": "https://a.example/", "apiKey": "sk-t"}}},
                 format="json")
    moved = {"claude": {"baseUrl": "https://b.example/", "apiKey": "<set>"}}
    assert client.patch("/api/v1/config", {"agentConnections": moved}, format="json").status_code == 200


def test_the_socket_refuses_a_tenant_endpoint_without_its_own_key(acme, host, host_keys):
    with AhpClient(host.port, acme.tokens["root"], "operator") as operator:
        operator.subscribe("ahp-root://")
        operator.dispatch("ahp-root://", {"type": "root/configChanged", "config": {
            "agentConnections": {"claude": {"baseUrl": "https://models.example/"}}}})
        assert operator.action("root/configChanged", rejected=True)["rejectionReason"] == OWN_KEY_NEEDED
    assert HostConfig.for_tenant(acme.tenant).agent_connections is None


@pytest.fixture
def tenant_model(settings):
    settings.AHP_OUTBOUND_ALLOW = "127.0.0.1"  # the scripted model is on loopback: allow-listed here only
    with ModelServer(Text("from the tenant's model")) as model:
        yield model


def turn_ending(host, token, provider):
    """How a turn ends: its chat/error or chat/turnComplete action."""
    def ended(frame):
        action = frame["params"].get("action", {}) if frame.get("method") == "action" else {}
        return action.get("type") in ("chat/error", "chat/turnComplete") and action.get("turnId") == turn

    with AhpClient(host.port, token) as alice:
        chat = default_chat(alice, alice.create_session(provider=provider))
        alice.subscribe(chat)
        turn = alice.start_turn(chat, "hi")
        return alice.wait_for(ended, 90, "the turn's end")["params"]["action"]


@pytest.mark.e2e
@pytest.mark.parametrize("provider, path", [pytest.param("claude", "", marks=needs_cli),
                                            pytest.param("github-copilot", "/v1", marks=needs_copilot)])
def test_a_turn_never_sends_the_hosts_key_to_a_tenant_endpoint(acme, host, host_keys, tenant_model, monkeypatch,
                                                               provider, path):
    """Saved while it was the host's own endpoint; then the host's moved: the turn is refused and the
    tenant's server hears nothing, the host's key least of all."""
    variable = "ANTHROPIC_BASE_URL" if provider == "claude" else "AHP_COPILOT_BASE_URL"
    monkeypatch.setenv(variable, tenant_model.url + path)
    set_config(host.port, acme.tokens["root"], agentConnections={provider: {"baseUrl": tenant_model.url + path}})
    monkeypatch.setenv(variable, "http://127.0.0.1:9" + path)
    ending = turn_ending(host, acme.tokens["member"], provider)
    assert HOST_KEY not in json.dumps(tenant_model.headers) and tenant_model.headers == []
    assert ending["error"]["message"] == f"Refused: {OWN_KEY_NEEDED}"


@pytest.mark.e2e
@pytest.mark.parametrize("provider, path", [pytest.param("claude", "", marks=needs_cli),
                                            pytest.param("github-copilot", "/v1", marks=needs_copilot)])
def test_a_tenants_connection_overrides_the_hosts_environment(acme, host, host_keys, tenant_model, provider, path):
    set_config(host.port, acme.tokens["root"], agentConnections={provider: {"baseUrl": tenant_model.url + path,
                                                                            "apiKey": "sk-tenant"}})
    with AhpClient(host.port, acme.tokens["member"]) as alice:
        chat = default_chat(alice, alice.create_session(provider=provider))
        alice.subscribe(chat)
        assert alice.reply_to(alice.start_turn(chat, "hi"), timeout=90) == "from the tenant's model"
    heard = json.dumps(tenant_model.headers)
    assert "sk-tenant" in heard and HOST_KEY not in heard


@pytest.fixture
def operator_agents(tmp_path, monkeypatch):
    script = tmp_path / "agent.py"
    script.write_text(AGENT)
    tmp_path.chmod(0o755)
    monkeypatch.setenv("AHP_ACP_AGENTS", json.dumps({"reporter": [sys.executable, str(script)],
                                                     "second": [sys.executable, str(script), "second"]}))
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


def sandbox_holding(uid, text):
    """Where `text` shows in what processes of sandbox user `uid` hold: their environment and
    command line, and the files of the sandbox's own folder."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.stat(f"/proc/{pid}").st_uid != uid:
                continue
            for part in ("environ", "cmdline"):
                with open(f"/proc/{pid}/{part}", "rb") as held:
                    if text.encode() in held.read():
                        found.append(f"/proc/{pid}/{part}")
        except OSError:
            pass  # it exited meanwhile
    return found


@pytest.mark.e2e
@pytest.mark.skipif(os.geteuid() != 0, reason="sandbox identities need a root host")
@pytest.mark.parametrize("provider, path", [pytest.param("claude", "", marks=needs_cli),
                                            pytest.param("github-copilot", "/v1", marks=needs_copilot)])
def test_the_model_key_never_enters_the_sandbox_the_proxy_adds_it(acme, host, settings, provider, path):
    """While the harness waits on its model, nothing of its sandbox holds the tenant's key (a Bash
    call there would print a placeholder), and the model still hears the key."""
    settings.AHP_OUTBOUND_ALLOW = "127.0.0.1"
    secret = "sk-tenant-never-inside-0123456789"
    hold = Hold(Text("answered"))
    with ModelServer(hold) as model:
        set_config(host.port, acme.tokens["root"], agentConnections={provider: {"baseUrl": model.url + path,
                                                                                "apiKey": secret}})
        with AhpClient(host.port, acme.tokens["member"]) as alice:
            session = alice.create_session(provider=provider)
            chat = default_chat(alice, session)
            alice.subscribe(chat)
            turn = alice.start_turn(chat, "hi")
            assert hold.arrived.wait(90), "the harness never asked its model"
            uid = identity.existing_sandbox_user(session.rsplit("/", 1)[-1])
            inside = sandbox_holding(uid, secret)
            places = (sandbox_root() / session.rsplit("/", 1)[-1], sandbox_home(session))  # the node's, the home
            files = [str(p) for place in places for p in place.rglob("*")
                     if p.is_file() and secret.encode() in p.read_bytes()]
            hold.released.set()
            assert alice.reply_to(turn, timeout=90) == "answered"
    assert (inside, files) == ([], [])
    assert secret in json.dumps(model.headers)


def test_a_chat_whose_tenant_names_another_acp_agent_starts_it_for_its_next_turn(acme, host, operator_agents):
    set_config(host.port, acme.tokens["root"], agentConnections={"acp": {"agent": "reporter"}})
    with AhpClient(host.port, acme.tokens["member"]) as alice:
        chat = default_chat(alice, alice.create_session(provider="acp"))
        alice.subscribe(chat)
        first = json.loads(alice.reply_to(alice.start_turn(chat, "hello"), timeout=60))
        set_config(host.port, acme.tokens["root"], agentConnections={"acp": {"agent": "second"}})
        # The warm agent was started with the other command: a new one, in a new ACP session.
        again = json.loads(alice.reply_to(alice.start_turn(chat, "hello"), timeout=60))
    assert again["process"] != first["process"] and again["prompt"] == 1 and len(again["blocks"]) == 2
