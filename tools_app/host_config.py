"""Checking HostConfig values as they arrive on the wire, REST or the admin."""
from .models import HostConfig

CREDENTIAL_KEYS = ("env", "headers")
MASK = "<set>"


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


def masked_mcp_servers(servers):
    """Credentials (env and headers values) read `<set>` wherever configuration is shown."""
    if not servers:
        return servers
    return {
        name: {k: ({ck: MASK for ck in v} if k in CREDENTIAL_KEYS and isinstance(v, dict) else v)
               for k, v in entry.items()}
        for name, entry in servers.items()
    }


def kept_credentials(new_servers, old_servers):
    """An edit that leaves a credential reading `<set>` keeps the stored value."""
    if not new_servers or not old_servers:
        return new_servers
    kept = {}
    for name, entry in new_servers.items():
        old = old_servers.get(name) or {}
        entry = dict(entry)
        for key in CREDENTIAL_KEYS:
            if isinstance(entry.get(key), dict):
                entry[key] = {ck: (old.get(key, {}).get(ck, cv) if cv == MASK else cv)
                              for ck, cv in entry[key].items()}
        kept[name] = entry
    return kept


def wire_values(config):
    values = config.to_wire()
    values["mcpServers"] = masked_mcp_servers(values["mcpServers"])
    return values
