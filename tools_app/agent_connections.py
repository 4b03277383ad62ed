"""HostConfig's `agentConnections`: per provider, where its harness finds its model (or, for
`acp`, which operator-defined agent runs). Credentials are sealed when stored, read `<set>`
wherever configuration is shown, and keep their stored value when `<set>` is sent back; they are
opened only for the harness of a turn."""
from urllib.parse import urlsplit

from sandbox.sealing import seal, unseal

from .credentials import MASK

# provider id -> {field: allowed values (a tuple) or str}
# permissions: whether a harness's request to run one of its built-ins asks the person or is approved.
FIELDS = {
    "claude": {"baseUrl": str, "apiKey": str, "model": str, "permissions": ("ask", "approve-all")},
    "github-copilot": {"type": ("openai", "azure", "anthropic"), "baseUrl": str, "apiKey": str,
                       "wireApi": ("completions", "responses"), "model": str, "githubToken": str,
                       "permissions": ("ask", "approve-all")},
    "acp": {"agent": str},
}
SECRETS = ("apiKey", "githubToken")


def check_agent_connections(wire, value):
    """`value` if it is a valid agentConnections object, else the sentence naming what is wrong."""
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
            allowed = FIELDS[provider].get(field)
            if allowed is None:
                return f"{wire}.{provider}.{field}: unknown field; use one of {', '.join(FIELDS[provider])}."
            if not isinstance(text, str) or (isinstance(allowed, tuple) and text not in allowed):
                expected = " or ".join(repr(a) for a in allowed) if isinstance(allowed, tuple) else "a string"
                return f"{wire}.{provider}.{field} must be {expected}."
            if field == "baseUrl" and urlsplit(text).scheme not in ("http", "https"):
                return f"{wire}.{provider}.baseUrl must be an http or https URL."
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
    """The provider's connection for a turn: `defaults` (the host's environment) overridden by
    what the tenant set, its secrets opened."""
    entry = (connections or {}).get(provider) or {}
    return {**defaults, **{field: unseal(text) if field in SECRETS else text for field, text in entry.items()}}
