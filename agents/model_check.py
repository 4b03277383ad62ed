"""Whether a provider's model endpoint answers its key: a one-token request from the host through
the outbound rules its sessions' sandboxes keep. A turn asks first (a success is kept a while, so
a warm chat pays nothing), and the admin's check link asks on demand; either way a
misconfiguration is one sentence naming the setting to fix, in seconds, instead of the CLI's
retries and its own variable names."""
import hashlib
import time
from typing import TYPE_CHECKING

import httpx

from kernel.lru_cache import LruCache
from sandbox.outbound import AsyncOutboundTransport, OutboundRefused

if TYPE_CHECKING:
    from .harness import AgentConnection

CHECK_SECONDS = 10  # a turn fails within 15 s of a dead endpoint
KEPT_SECONDS = 300
CLAUDE_CHECK_MODEL = "claude-haiku-4-5"
COPILOT_CHECK_MODEL = "gpt-4.1"
ALLOW_HINT = "add it to AHP_OUTBOUND_ALLOW or the admin's outbound allow-list"
GITHUB_API = "https://api.github.com"  # where a githubToken's Copilot CLI signs in

_passed = LruCache(256)  # the connection's fingerprint -> when it last answered


def _setting(provider: str, field: str) -> str:
    return f"agentConnections.{provider}.{field}"


def no_endpoint(provider: str) -> str:
    """The sentence for a provider with no model endpoint at all (the host's environment names none)."""
    if provider == "github-copilot":
        return ("The github-copilot agent has no model endpoint: set agentConnections.github-copilot (baseUrl and "
                "apiKey, or githubToken) or AHP_COPILOT_BASE_URL.")
    return (f"The {provider} agent has no model endpoint: set {_setting(provider, 'baseUrl')} and "
            f"{_setting(provider, 'apiKey')}.")


def no_key(provider: str) -> str:
    """The sentence for an endpoint named without a key."""
    return (f"The {provider} agent has no model key: set {_setting(provider, 'apiKey')} "
            f"(github-copilot: or {_setting(provider, 'githubToken')}).") if provider == "github-copilot" else (
        f"The {provider} agent has no model key: set {_setting(provider, 'apiKey')}.")


def _azure_base(base: str) -> str:
    """Where an Azure OpenAI resource answers the versionless v1 API (the Copilot runtime's route
    when no api version is set): the resource's URL with /openai/v1, given either way."""
    return base if base.endswith("/openai/v1") else base + "/openai/v1"


def _request(provider: str, connection: "AgentConnection") -> httpx.Request:
    """The one-token request for `connection` as its harness would make it: Anthropic's Messages,
    OpenAI's Chat Completions or Responses (an Azure resource's v1 route with its `api-key`), or,
    for GitHub's own models on a githubToken, GitHub's API asked who the token is."""
    if not connection.get("baseUrl"):
        return httpx.Request("GET", f"{GITHUB_API}/user", headers={
            "Authorization": f"Bearer {connection['githubToken']}", "Accept": "application/vnd.github+json"})
    base = connection["baseUrl"].rstrip("/")
    key = connection.get("apiKey") or ""
    kind = "anthropic" if provider == "claude" else connection.get("type") or "openai"
    if kind == "anthropic":
        path = "/messages" if base.endswith("/v1") else "/v1/messages"
        return httpx.Request("POST", base + path, headers={"x-api-key": key, "anthropic-version": "2023-06-01"},
                             json={"model": connection.get("model") or CLAUDE_CHECK_MODEL, "max_tokens": 1,
                                   "messages": [{"role": "user", "content": "hi"}]})
    headers = {"api-key": key} if kind == "azure" else {"Authorization": f"Bearer {key}"}
    base = _azure_base(base) if kind == "azure" else base
    model = connection.get("model") or COPILOT_CHECK_MODEL
    if connection.get("wireApi") == "responses":
        # The Responses API's least output is 16 tokens.
        return httpx.Request("POST", base + "/responses", headers=headers,
                             json={"model": model, "max_output_tokens": 16, "input": "hi"})
    return httpx.Request("POST", base + "/chat/completions", headers=headers,
                         json={"model": model, "max_tokens": 1, "messages": [{"role": "user", "content": "hi"}]})


def _answer_problem(provider: str, connection: "AgentConnection", response: httpx.Response) -> str | None:
    """The sentence for an endpoint's answer that no turn could get past, or None."""
    base = connection.get("baseUrl")
    if base is None and response.status_code in (401, 403):
        return (f"GitHub refused the {provider} agent's token (HTTP {response.status_code}): set "
                f"{_setting(provider, 'githubToken')} to a token of an account with GitHub Copilot.")
    if response.status_code in (401, 403):
        return (f"The {provider} agent's model endpoint {base} refused its key (HTTP {response.status_code}): "
                f"set {_setting(provider, 'apiKey')} to a key it accepts.")
    if response.status_code == 404 and base and connection.get("model"):
        return (f"The {provider} agent's model endpoint {base} does not know the model "
                f"{connection['model']!r} (HTTP 404): check {_setting(provider, 'model')} and "
                f"{_setting(provider, 'baseUrl')}.")
    return None  # it answered: anything else (a rate limit, a busy server) is the turn's to meet


async def model_problem(provider: str, connection: "AgentConnection") -> str | None:
    """None when `connection` (a provider's opened agentConnections entry over the host's) reaches
    a model that takes its key, else the sentence naming the setting to fix."""
    if not connection.get("baseUrl") and not connection.get("githubToken"):
        return no_endpoint(provider)
    if not (connection.get("apiKey") or connection.get("githubToken")):
        return no_key(provider)
    request = _request(provider, connection)
    fingerprint = hashlib.sha256(repr((sorted(connection.items()), str(request.url))).encode()).hexdigest()
    if time.monotonic() - (_passed.get(fingerprint) or -KEPT_SECONDS) < KEPT_SECONDS:
        return None
    where = (f"{_setting(provider, 'baseUrl')}" if connection.get("baseUrl")
             else f"GitHub's API (for {_setting(provider, 'githubToken')})")
    endpoint = (f"The {provider} agent's model endpoint {connection['baseUrl']}" if connection.get("baseUrl")
                else f"GitHub's API at {GITHUB_API}, asked about the {provider} agent's token,")
    try:
        async with httpx.AsyncClient(transport=AsyncOutboundTransport(), timeout=CHECK_SECONDS) as http:
            response = await http.send(request)
    except OutboundRefused as refused:
        return f"{refused.sentence} The {provider} agent's model is at {where}: {ALLOW_HINT}."
    except httpx.TimeoutException:
        return f"{endpoint} did not answer within {CHECK_SECONDS} s: check {where}."
    except httpx.HTTPError as error:
        return f"{endpoint} could not be reached ({error.__class__.__name__}): check {where}."
    problem = _answer_problem(provider, connection, response)
    if problem is None:
        _passed.put(fingerprint, time.monotonic())
    return problem


# What a harness CLI says when its model refused it, in its own words (and variable names): the
# endpoint's answer changed since the turn's check, or the sandbox's proxy refused the address.
_CLI_REFUSALS = ("Authentication failed with provider", "Invalid API key", "Not logged in", "authentication_error")


def cli_failure(provider: str, text: str) -> str | None:
    """The sentence for a turn whose harness reported its model refused it, or None for any other failure."""
    if not any(words in text for words in _CLI_REFUSALS):
        return None
    return (f"The {provider} agent's model refused its request: set agentConnections.{provider}.apiKey to a key "
            f"its endpoint accepts, and check agentConnections.{provider}.baseUrl (a private address needs "
            "AHP_OUTBOUND_ALLOW or the admin's outbound allow-list); the admin's check link beside the connection "
            "says which.")
