"""HostConfig's `agentConnections`: per provider, where its harness finds its model (or, for
`acp`, which operator-defined agent runs). Credentials are sealed when stored, read `<set>`
wherever configuration is shown, and keep their stored value when `<set>` is sent back; they are
opened only for the harness of a turn. The host's own keys (its environment) go only to the host's
own endpoints: a tenant that names another endpoint brings its own key, or is refused."""
from typing import Any

from agents.harness import host_connection
from kernel.refusals import Refused
from sandbox.sealing import seal, unseal

from .credentials import MASK, is_http_url

# provider id -> {field: allowed values (a tuple) or str}
# permissions: whether a harness's request to run one of its built-ins asks the person or is approved.
FIELDS: dict[str, dict[str, Any]] = {
    "claude": {"baseUrl": str, "apiKey": str, "model": str, "permissions": ("ask", "approve-all")},
    "github-copilot": {"type": ("openai", "azure", "anthropic"), "baseUrl": str, "apiKey": str,
                       "wireApi": ("completions", "responses"), "model": str, "githubToken": str,
                       "permissions": ("ask", "approve-all")},
    "acp": {"agent": str},
}
SECRETS = ("apiKey", "githubToken")
OWN_KEY_NEEDED = ("A model endpoint of the tenant's own needs a key of its own: set apiKey (github-copilot: apiKey "
                  "or githubToken) beside a baseUrl that is not the host's; the host's keys go only to the host's "
                  "endpoints.")


def field_problem(wire, provider, field, text):
    """The sentence naming what is wrong with one field of a provider's entry, or None."""
    allowed = FIELDS[provider].get(field)
    if allowed is None:
        return f"{wire}.{provider}.{field}: unknown field; use one of {', '.join(FIELDS[provider])}."
    if not isinstance(text, str) or (isinstance(allowed, tuple) and text not in allowed):
        expected = " or ".join(repr(a) for a in allowed) if isinstance(allowed, tuple) else "a string"
        return f"{wire}.{provider}.{field} must be {expected}."
    if field == "baseUrl" and not is_http_url(text):
        return f"{wire}.{provider}.baseUrl must be an http or https URL."
    return None


def own_endpoint(entry, host_base_url):
    """Whether `entry` names a baseUrl other than the host's own endpoint `host_base_url`."""
    base_url = entry.get("baseUrl")
    return bool(base_url) and base_url.rstrip("/") != (host_base_url or "").rstrip("/")


def borrows_host_key(entry, host_base_url):
    """Whether `entry` names an endpoint of its own without a key of its own: the host's would be
    sent there. A secret that reads `<set>` stands for the stored one."""
    return own_endpoint(entry, host_base_url) and not any(entry.get(secret) for secret in SECRETS)


def check_agent_connections(wire, value):
    """None if `value` is a valid agentConnections object, else the sentence naming what is wrong."""
    if value is None:
        return None
    if not isinstance(value, dict):
        return f"{wire} must be an object by provider id."
    for provider, entry in value.items():
        if provider not in FIELDS:
            return f"{wire}.{provider}: no such provider; use one of {', '.join(FIELDS)}."
        if not isinstance(entry, dict):
            return f"{wire}.{provider} must be an object."
        for field, text in entry.items():
            problem = field_problem(wire, provider, field, text)
            if problem:
                return problem
        if borrows_host_key(entry, host_connection(provider).get("baseUrl")):
            return OWN_KEY_NEEDED
    return None


def masked_agent_connections(connections):
    if not connections:
        return connections
    return {provider: {field: MASK if field in SECRETS else text for field, text in entry.items()}
            for provider, entry in connections.items()}


def stored_agent_connections(new, old):
    """What an edit stores: a secret sent back as `<set>` keeps its stored value, any other is sealed."""
    if not new:
        return new
    old = old if isinstance(old, dict) else {}
    stored = {}
    for provider, entry in new.items():
        kept = old.get(provider) if isinstance(old.get(provider), dict) else {}
        stored[provider] = {field: (kept[field] if text == MASK and field in kept else seal(text))
                            if field in SECRETS else text for field, text in entry.items()
                            if not (field in SECRETS and text == MASK and field not in kept)}
    return stored


def opened_connection(connections, provider, defaults):
    """The provider's connection for a turn: what the tenant set, its secrets opened, over `defaults`
    (the host's endpoint). The host's secrets apply only on the host's endpoint: a baseUrl of the
    tenant's own takes none of them, and without a key of its own the turn is refused (a
    configuration stored before this check, or the host's endpoint moved since)."""
    entry = {field: unseal(text) if field in SECRETS else text
             for field, text in ((connections or {}).get(provider) or {}).items()}
    if entry.get("githubToken") and not entry.get("baseUrl"):
        return entry  # GitHub's models on the tenant's own token: nothing of the host's applies
    if own_endpoint(entry, defaults.get("baseUrl")):
        if borrows_host_key(entry, defaults.get("baseUrl")):
            raise Refused(OWN_KEY_NEEDED, "no_agent")
        defaults = {field: text for field, text in defaults.items() if field not in SECRETS}
    return {**defaults, **entry}
