"""Checking HostConfig values as they arrive on the wire, REST or the admin; the secrets in
them sealed when stored and masked wherever they are shown."""
import re
from urllib.parse import urlsplit, urlunsplit

from sandbox.sealing import seal

from .models import HostConfig

CREDENTIAL_KEYS = ("env", "headers")
MASK = "<set>"
# A flag or variable name that carries a credential: --token, --api-key, GITHUB_TOKEN=, ...
CREDENTIAL_NAME = re.compile(r"token|key|secret|passw|pwd|auth|credential|bearer|cookie", re.IGNORECASE)


class ConfigInvalid(ValueError):
    pass


def _bool(key, value):
    if not isinstance(value, bool):
        raise ConfigInvalid(f"{key} must be true or false.")
    return value


def _milliseconds(key, value):
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 2**31 - 1:
        raise ConfigInvalid(f"{key} must be a whole number of milliseconds, 0 or more.")
    return value


def _choice(*choices):
    def check(key, value):
        if value not in choices:
            raise ConfigInvalid(f"{key} must be one of {', '.join(repr(c) for c in choices)}.")
        return value
    return check


def _providers(key, value):
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ConfigInvalid(f"{key} must be a list of provider ids.")
    return value


TENANT_COMMAND = ("a tenant cannot name a command for the host to run; pick one of the operator's stdio servers "
                  'with {"type": "stdio", "server": "<name>"}')


def _mcp_servers(key, value):
    if value is not None and not (isinstance(value, dict) and all(isinstance(v, dict) for v in value.values())):
        raise ConfigInvalid(f"{key} must be an object mapping server names to server entries.")
    for name, entry in (value or {}).items():
        if entry.get("type", "stdio") == "stdio" and {"command", "args", "cwd"} & set(entry):
            raise ConfigInvalid(f"{key}.{name}: {TENANT_COMMAND}.")
    return value


CHECKS = {
    "sessionTools": _bool,
    "sessionToolsProviders": _providers,
    "advancedTools": _bool,
    "mcpServers": _mcp_servers,
    "clientToolTimeoutMs": _milliseconds,
    "clientToolCallDisconnectTimeoutMs": _milliseconds,
    "agentOrchestrationLimits": _choice("on", "off"),
    "agentOrchestrationLimitsScope": _choice("tree", "session"),
    "chatMoves.enabled": _bool,
}


def checked_changes(changes, replace=False):
    """{model field: value} for wire `changes`; with `replace`, omitted keys return to defaults.
    An unknown key or a bad value raises ConfigInvalid naming it."""
    if not isinstance(changes, dict):
        raise ConfigInvalid("config must be an object.")
    unknown = sorted(set(changes) - set(CHECKS))
    if unknown:
        raise ConfigInvalid(f"Unknown configuration key {unknown[0]}.")
    fields = {}
    if replace:
        for key, field in HostConfig.WIRE_KEYS.items():
            fields[field] = HostConfig._meta.get_field(field).get_default()
    for key, value in changes.items():
        fields[HostConfig.WIRE_KEYS[key]] = CHECKS[key](key, value)
    return fields


def masked_url(url):
    """`url` with its userinfo and query values reading `<set>` (all of it when it does not parse)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return MASK
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{MASK}@{netloc.rpartition('@')[2]}"
    query = "&".join(f"{name}={MASK}" if sep and value else piece
                     for piece in parts.query.split("&") if piece
                     for name, sep, value in [piece.partition("=")])
    return urlunsplit((parts.scheme, netloc, parts.path, query if parts.query else "", parts.fragment))


def masked_args(args):
    """stdio args with what looks like a credential reading `<set>`: the value after a flag
    such as --token, a `--token=` or `API_KEY=` value, and a URL's userinfo and query."""
    masked, after_flag = [], False
    for arg in args:
        if not isinstance(arg, str):
            masked.append(arg)
            continue
        name, sep, value = arg.partition("=")
        if after_flag:
            arg = MASK
        elif sep and value and CREDENTIAL_NAME.search(name):
            arg = f"{name}={MASK}"
        elif "://" in arg:
            arg = masked_url(arg)
        after_flag = arg.startswith("-") and not sep and bool(CREDENTIAL_NAME.search(arg))
        masked.append(arg)
    return masked


def masked_entry(entry):
    if not isinstance(entry, dict):
        return entry
    shown = {k: ({ck: MASK for ck in v} if k in CREDENTIAL_KEYS and isinstance(v, dict) else v)
             for k, v in entry.items()}
    if isinstance(shown.get("url"), str):
        shown["url"] = masked_url(shown["url"])
    if isinstance(shown.get("args"), list):
        shown["args"] = masked_args(shown["args"])
    return shown


def masked_mcp_servers(servers):
    """Credentials (env and headers values, URL userinfo and query values, credential-like
    args) read `<set>` wherever configuration is shown."""
    if not servers:
        return servers
    return {name: masked_entry(entry) for name, entry in servers.items()}


def secret_values(entry):
    """Every secret an opened `entry` holds: env and headers values, URL userinfo and query
    values, credential-like args. None of them may appear in a log line or a recorded error."""
    found = set()
    for key in CREDENTIAL_KEYS:
        if isinstance(entry.get(key), dict):
            found.update(v for v in entry[key].values() if isinstance(v, str))
            found.update(v.split(" ", 1)[1] for v in entry[key].values() if isinstance(v, str) and " " in v)
    urls = [entry["url"]] if isinstance(entry.get("url"), str) else []
    args = entry.get("args") if isinstance(entry.get("args"), list) else []
    for shown, arg in zip(masked_args(args), args):
        if shown == arg:
            continue
        if "://" in arg:
            urls.append(arg)
        else:
            found.add(arg.partition("=")[2] if shown != MASK else arg)
    for url in urls:
        try:
            parts = urlsplit(url)
        except ValueError:
            found.add(url)
            continue
        if "@" in parts.netloc:
            found.add(parts.netloc.rpartition("@")[0])
            found.update(parts.netloc.rpartition("@")[0].split(":"))
        found.update(piece.partition("=")[2] for piece in parts.query.split("&"))
    return {secret for secret in found if len(secret) >= 3}


def scrubbed(failure, secrets):
    """`failure` (and every exception grouped in it) with the secrets in its message read `<set>`."""
    if isinstance(failure, BaseExceptionGroup):
        for inner in failure.exceptions:
            scrubbed(inner, secrets)
    else:
        failure.args = tuple(_without(arg, secrets) if isinstance(arg, str) else arg for arg in failure.args)
    return failure


def _without(text, secrets):
    for secret in sorted(secrets, key=len, reverse=True):
        text = text.replace(secret, MASK)
    return text


def _kept_args(new_args, old_args):
    """An arg sent back as shown keeps the stored one (in order, for repeats)."""
    if not isinstance(new_args, list) or not isinstance(old_args, list):
        return new_args
    stored = {}
    for shown, old in zip(masked_args(old_args), old_args):
        if shown != old:
            stored.setdefault(shown, []).append(old)
    return [stored[arg].pop(0) if isinstance(arg, str) and stored.get(arg) else arg for arg in new_args]


def stored_mcp_servers(new_servers, old_servers):
    """What an edit stores: values sent back as shown (`<set>`, masked URL or args) keep the
    stored ones; every other env and headers value is sealed (encrypted at rest)."""
    if not new_servers:
        return new_servers
    old_servers = old_servers if isinstance(old_servers, dict) else {}
    stored = {}
    for name, entry in new_servers.items():
        if not isinstance(entry, dict):
            stored[name] = entry
            continue
        old = old_servers.get(name) if isinstance(old_servers.get(name), dict) else {}
        entry = dict(entry)
        for key in CREDENTIAL_KEYS:
            if isinstance(entry.get(key), dict):
                old_values = old.get(key) if isinstance(old.get(key), dict) else {}
                entry[key] = {ck: (old_values[ck] if cv == MASK and ck in old_values
                                   else seal(cv) if isinstance(cv, str) else cv)
                              for ck, cv in entry[key].items()}
        if isinstance(entry.get("url"), str) and isinstance(old.get("url"), str) and entry["url"] == masked_url(old["url"]):
            entry["url"] = old["url"]
        if "args" in entry:
            entry["args"] = _kept_args(entry["args"], old.get("args"))
        stored[name] = entry
    return stored


def wire_values(config):
    values = config.to_wire()
    values["mcpServers"] = masked_mcp_servers(values["mcpServers"])
    return values
