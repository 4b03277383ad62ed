"""A misconfigured model fails the turn within 15 s with a sentence naming the setting to fix, for
each provider, over a real socket against the scripted model (refusing, or not there at all); the
admin's check link says the same before any turn."""
import html
import socket
import time

import pytest

from agents.harness import claude_cli, copilot_cli
from grants.models import Principal
from tools_app.actions import do_change_host_config
from tools_app.models import HostConfig

from ..ahp.protocol.harness import AhpClient, default_chat
from .model_server import ModelServer

pytestmark = pytest.mark.e2e
ALLOW_HINT = "add it to AHP_OUTBOUND_ALLOW or the admin's outbound allow-list"


def closed_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def failed_turn(host, token, provider):
    """(the turn's error message, seconds from the turn's start to its failure)."""
    with AhpClient(host.port, token) as alice:
        session = alice.create_session(provider=provider)
        chat = default_chat(alice, session)
        alice.subscribe(chat)
        started = time.monotonic()
        turn = alice.start_turn(chat, "hello")
        error = alice.action("chat/error", turnId=turn, timeout=60)["action"]["error"]
    return error["message"], time.monotonic() - started


@pytest.fixture
def no_host_model(monkeypatch, settings):
    for name in ("ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY", "AHP_COPILOT_BASE_URL", "AHP_COPILOT_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    settings.AHP_OUTBOUND_ALLOW = "127.0.0.1"


def connect(tenant, provider, **entry):
    do_change_host_config(Principal.root(tenant), {"agentConnections": {provider: entry}})


@pytest.mark.skipif(claude_cli() is None, reason="needs the Claude Code CLI (make harness)")
def test_claude_with_a_wrong_key_fails_fast_naming_the_key_setting(acme, host, no_host_model):
    with ModelServer(refuse=401) as model:
        connect(acme.tenant, "claude", baseUrl=model.url, apiKey="wrong")
        message, seconds = failed_turn(host, acme.tokens["member"], "claude")
    assert message == (f"Refused: The claude agent's model endpoint {model.url} refused its key (HTTP 401): "
                       "set agentConnections.claude.apiKey to a key it accepts.")
    assert seconds < 15


@pytest.mark.skipif(claude_cli() is None, reason="needs the Claude Code CLI (make harness)")
def test_claude_with_an_unreachable_endpoint_fails_fast_naming_the_base_url(acme, host, no_host_model):
    url = f"http://127.0.0.1:{closed_port()}"
    connect(acme.tenant, "claude", baseUrl=url, apiKey="k")
    message, seconds = failed_turn(host, acme.tokens["member"], "claude")
    assert message == (f"Refused: The claude agent's model endpoint {url} could not be reached (ConnectError): "
                       "check agentConnections.claude.baseUrl.")
    assert seconds < 15


@pytest.mark.skipif(claude_cli() is None, reason="needs the Claude Code CLI (make harness)")
def test_claude_with_nothing_configured_names_the_key_setting(acme, host, no_host_model):
    message, seconds = failed_turn(host, acme.tokens["member"], "claude")
    assert message == "Refused: The claude agent has no model key: set agentConnections.claude.apiKey."
    assert seconds < 15


@pytest.mark.skipif(copilot_cli() is None, reason="needs the Copilot CLI (make harness)")
def test_copilot_refused_by_the_outbound_rules_names_the_allow_list(acme, host, no_host_model, settings):
    settings.AHP_OUTBOUND_ALLOW = ""
    with ModelServer() as model:
        connect(acme.tenant, "github-copilot", baseUrl=f"{model.url}/v1", apiKey="k")
        message, seconds = failed_turn(host, acme.tokens["member"], "github-copilot")
    assert message == (f"Refused: The host does not connect to 127.0.0.1:{model.port}: it is a private address and "
                       "not allow-listed. The github-copilot agent's model is at agentConnections.github-copilot.baseUrl: "
                       f"{ALLOW_HINT}.")
    assert seconds < 15
    assert model.requests == []


def test_the_admins_check_link_reports_success_or_the_sentence(acme, tenant_admin, no_host_model):
    with ModelServer() as good, ModelServer(refuse=401) as refusing:
        connect(acme.tenant, "claude", baseUrl=good.url, apiKey="k")
        url = f"/admin/tools_app/hostconfig/{HostConfig.for_tenant(acme.tenant).pk}/change/check-model/claude/"
        page = tenant_admin.get(url).content.decode()
        assert 'id="check-ok"' in page and [r.body["max_tokens"] for r in good.requests] == [1]
        connect(acme.tenant, "claude", baseUrl=refusing.url, apiKey="wrong")
        page = tenant_admin.get(url).content.decode()
    assert (f"The claude agent&#x27;s model endpoint {refusing.url} refused its key (HTTP 401): set "
            "agentConnections.claude.apiKey to a key it accepts.") in page
    assert "check-model/claude/" in tenant_admin.get(
        f"/admin/tools_app/hostconfig/{HostConfig.for_tenant(acme.tenant).pk}/change/").content.decode()


# A Copilot connection of each kind the check asks in its own way: (its entry at the scripted server's
# URL, the request the check made, the header its key travels in, the sentence a refusal gives).
COPILOT_KINDS = {
    "github-token": (lambda url: {"githubToken": "ghp-wrong"}, "/user", ("authorization", "Bearer ghp-wrong"),
                     "GitHub refused the github-copilot agent's token (HTTP 401): set "
                     "agentConnections.github-copilot.githubToken to a token of an account with GitHub Copilot."),
    "azure": (lambda url: {"type": "azure", "baseUrl": url, "apiKey": "az-wrong", "model": "my-deployment"},
              "/openai/v1/chat/completions", ("api-key", "az-wrong"),
              "The github-copilot agent's model endpoint {url} refused its key (HTTP 401): set "
              "agentConnections.github-copilot.apiKey to a key it accepts."),
    "responses": (lambda url: {"type": "openai", "baseUrl": f"{url}/v1", "apiKey": "sk-wrong", "wireApi": "responses"},
                  "/v1/responses", ("authorization", "Bearer sk-wrong"),
                  "The github-copilot agent's model endpoint {url}/v1 refused its key (HTTP 401): set "
                  "agentConnections.github-copilot.apiKey to a key it accepts."),
}


@pytest.fixture
def github_at(monkeypatch):
    """GitHub's API at the scripted server: where a githubToken's check asks."""
    def point(url):
        monkeypatch.setattr("agents.model_check.GITHUB_API", url)
    return point


@pytest.mark.parametrize("kind", COPILOT_KINDS)
def test_the_check_link_asks_each_copilot_connection_kind_its_own_way(acme, tenant_admin, no_host_model, github_at,
                                                                      kind):
    entry, path, (header, key), refused = COPILOT_KINDS[kind]
    url = f"/admin/tools_app/hostconfig/{HostConfig.for_tenant(acme.tenant).pk}/change/check-model/github-copilot/"
    with ModelServer() as good:
        github_at(good.url)
        connect(acme.tenant, "github-copilot", **entry(good.url))
        page = tenant_admin.get(url).content.decode()
        assert 'id="check-ok"' in page, page
        paths = [h for h in good.headers if h.get(header.title()) == key or h.get(header) == key]
        assert len(paths) == 1 and [r.api for r in good.requests] == [
            {"github-token": "github", "azure": "openai", "responses": "responses"}[kind]]
    with ModelServer(refuse=401) as refusing:
        github_at(refusing.url)
        connect(acme.tenant, "github-copilot", **entry(refusing.url))
        page = html.unescape(tenant_admin.get(url).content.decode())
    assert refused.format(url=refusing.url) in page


@pytest.mark.skipif(copilot_cli() is None, reason="needs the Copilot CLI (make harness)")
@pytest.mark.parametrize("kind", COPILOT_KINDS)
def test_a_copilot_turn_on_a_refused_connection_fails_fast_naming_the_setting(acme, host, no_host_model, github_at,
                                                                               kind):
    entry, path, _, refused = COPILOT_KINDS[kind]
    with ModelServer(refuse=401) as model:
        github_at(model.url)
        connect(acme.tenant, "github-copilot", **entry(model.url))
        message, seconds = failed_turn(host, acme.tokens["member"], "github-copilot")
    assert message == "Refused: " + refused.format(url=model.url)
    assert seconds < 15


def test_a_harness_refused_by_its_model_mid_chat_is_told_in_the_hosts_words():
    from agents.model_check import cli_failure

    said = cli_failure("github-copilot", "Session error: Authentication failed with provider at "
                                         "http://model.ahp-sandbox.invalid/v1 (HTTP 403). Check your COPILOT_PROVIDER_API_KEY")
    assert said.startswith("The github-copilot agent's model refused its request: set "
                           "agentConnections.github-copilot.apiKey")
    assert "COPILOT_PROVIDER" not in said and "AHP_OUTBOUND_ALLOW" in said
    assert cli_failure("claude", "The claude harness stopped: killed") is None
