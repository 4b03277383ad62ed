"""Whether a provider's model endpoint answers its key: a one-token request from the host through
the outbound rules its sessions' sandboxes keep. A turn asks first (a success is kept a while, so
a warm chat pays nothing), and the admin's check link asks on demand; either way a
misconfiguration is one sentence naming the setting to fix, in seconds, instead of the CLI's
retries and its own variable names."""
import hashlib
import time

import httpx

from kernel.kept import Kept
from sandbox.outbound import AsyncOutboundTransport, OutboundRefused

CHECK_SECONDS = 10  # a turn fails within 15 s of a dead endpoint
KEPT_SECONDS = 300
CLAUDE_CHECK_MODEL = "claude-haiku-4-5"
COPILOT_CHECK_MODEL = "gpt-4.1"
ALLOW_HINT = "add it to AHP_OUTBOUND_ALLOW or the admin's outbound allow-list"

_passed = Kept(256)  # the connection's fingerprint -> when it last answered


def _setting(provider: str, field: str) -> str:
    return f"agentConnections.{provider}.{field}"


def no_key(provider: str) -> str:
    return (f"The {provider} agent has no model key: set {_setting(provider, 'apiKey')} "
            f"(github-copilot: or {_setting(provider, 'githubToken')}).") if provider == "github-copilot" else (
        f"The {provider} agent has no model key: set {_setting(provider, 'apiKey')}.")


def _request(provider: str, connection: dict) -> httpx.Request | None:
    """The one-token request for `connection`, or None when its kind has no plain check (GitHub's
    own models, Azure's deployments)."""
    base = connection["baseUrl"].rstrip("/")
    key = connection.get("apiKey") or ""
    kind = "anthropic" if provider == "claude" else connection.get("type") or "openai"
    if kind == "anthropic":
        path = "/messages" if base.endswith("/v1") else "/v1/messages"
        return httpx.Request("POST", base + path, headers={"x-api-key": key, "anthropic-version": "2023-06-01"},
                             json={"model": connection.get("model") or CLAUDE_CHECK_MODEL, "max_tokens": 1,
                                   "messages": [{"role": "user", "content": "hi"}]})
    if kind == "openai" and (connection.get("wireApi") or "completions") == "completions":
        return httpx.Request("POST", base + "/chat/completions", headers={"Authorization": f"Bearer {key}"},
                             json={"model": connection.get("model") or COPILOT_CHECK_MODEL, "max_tokens": 1,
                                   "messages": [{"role": "user", "content": "hi"}]})
    return None


def _answer_problem(provider: str, connection: dict, response: httpx.Response) -> str | None:
    base = connection["baseUrl"]
    if response.status_code in (401, 403):
        return (f"The {provider} agent's model endpoint {base} refused its key (HTTP {response.status_code}): "
                f"set {_setting(provider, 'apiKey')} to a key it accepts.")
    if response.status_code == 404 and connection.get("model"):
        return (f"The {provider} agent's model endpoint {base} does not know the model "
                f"{connection['model']!r} (HTTP 404): check {_setting(provider, 'model')} and "
                f"{_setting(provider, 'baseUrl')}.")
    return None  # it answered: anything else (a rate limit, a busy server) is the turn's to meet


async def model_problem(provider: str, connection: dict) -> str | None:
    """None when `connection` (a provider's opened agentConnections entry over the host's) reaches
    a model that takes its key, else the sentence naming the setting to fix."""
    if not connection.get("baseUrl"):
        return None  # GitHub's own models on a githubToken, or none at all (the provider says which)
    if not (connection.get("apiKey") or connection.get("githubToken")):
        return no_key(provider)
    request = _request(provider, connection)
    if request is None:
        return None
    fingerprint = hashlib.sha256(repr(sorted(connection.items())).encode()).hexdigest()
    if time.monotonic() - (_passed.get(fingerprint) or -KEPT_SECONDS) < KEPT_SECONDS:
        return None
    base = connection["baseUrl"]
    try:
        async with httpx.AsyncClient(transport=AsyncOutboundTransport(), timeout=CHECK_SECONDS) as http:
            response = await http.send(request)
    except OutboundRefused as refused:
        return f"{refused.sentence} The {provider} agent's model is at {_setting(provider, 'baseUrl')}: {ALLOW_HINT}."
    except httpx.TimeoutException:
        return (f"The {provider} agent's model endpoint {base} did not answer within {CHECK_SECONDS} s: "
                f"check {_setting(provider, 'baseUrl')}.")
    except httpx.HTTPError as error:
        return (f"The {provider} agent's model endpoint {base} could not be reached ({error.__class__.__name__}): "
                f"check {_setting(provider, 'baseUrl')}.")
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
