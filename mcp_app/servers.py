"""Configured MCP servers: which entries are usable, and the map a session's agent is given.

An entry is `{"type": "stdio", "command", "args"?, "cwd"?, "env"?}` or
`{"type": "http", "url", "headers"?}`. Anything else is one warning in the log (naming the
server and the reason, never a credential) and is left out; the other entries still apply.
"""
import hashlib
import json
import logging
from pathlib import Path
from urllib.parse import unquote, urlparse

from sandbox.sealing import unseal

logger = logging.getLogger(__name__)

PLUGIN_MCP_FILE = ".mcp.json"


def _string_map(value):
    return isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())


def entry_problem(entry):
    """Why `entry` is not a usable server entry, or None when it is."""
    if not isinstance(entry, dict):
        return "an entry must be an object"
    kind = entry.get("type")
    if kind == "stdio":
        if not isinstance(entry.get("command"), str) or not entry["command"]:
            return 'a stdio entry needs "command"'
        if "args" in entry and not (isinstance(entry["args"], list) and all(isinstance(a, str) for a in entry["args"])):
            return '"args" must be a list of strings'
        if "cwd" in entry and not isinstance(entry["cwd"], str):
            return '"cwd" must be a string'
        if "env" in entry and not _string_map(entry["env"]):
            return '"env" must map names to strings'
        return None
    if kind == "http":
        url = entry.get("url")
        if not isinstance(url, str) or urlparse(url).scheme not in ("http", "https"):
            return 'an http entry needs an http(s) "url"'
        if "headers" in entry and not _string_map(entry["headers"]):
            return '"headers" must map names to strings'
        return None
    return 'its "type" must be "stdio" or "http"'


def usable_servers(servers, origin="mcpServers"):
    """The usable entries of `servers`; None when there are none at all (absent, not empty)."""
    if not isinstance(servers, dict) or not servers:
        return None
    usable = {}
    for name, entry in servers.items():
        problem = entry_problem(entry)
        if problem:
            logger.warning("Left out MCP server %r of %s: %s.", name, origin, problem)
            continue
        usable[name] = entry
    return usable or None


def plugin_servers(customizations):
    """MCP servers the client plugins in `customizations` bundle: an Open Plugins plugin lists
    them in `.mcp.json` at its root. Only plugins the host can read (file: URIs) contribute;
    an entry without "type" is stdio when it has a command and http when it has a url."""
    found = {}
    for plugin in customizations or ():
        if not isinstance(plugin, dict) or plugin.get("type", "plugin") != "plugin" or plugin.get("enabled") is False:
            continue
        uri = urlparse(str(plugin.get("uri", "")))
        if uri.scheme != "file":
            continue
        manifest = Path(unquote(uri.path)) / PLUGIN_MCP_FILE
        try:
            declared = json.loads(manifest.read_text()).get("mcpServers") or {}
        except (OSError, ValueError, AttributeError) as exc:
            logger.warning("Could not read the MCP servers of plugin %s: %s", plugin.get("uri"), exc.__class__.__name__)
            continue
        for name, entry in declared.items() if isinstance(declared, dict) else ():
            if isinstance(entry, dict) and "type" not in entry:
                entry = {"type": "stdio" if "command" in entry else "http", **entry}
            found[name] = entry
    return found


def merged_servers(tenant_servers, client_servers):
    """The tenant's map with client-contributed servers over it (a client wins a name clash);
    None when both are absent."""
    merged = dict(tenant_servers or {})
    merged.update(client_servers or {})
    return merged or None


def fingerprint(entry):
    """Identifies one server configuration, credentials included, without showing them."""
    return hashlib.sha256(json.dumps(entry, sort_keys=True).encode()).hexdigest()[:16]


def revealed(entry):
    """`entry` with its sealed secrets (env and headers values) opened, for the one place that
    uses them (starting or calling the server). Never log or store what this answers."""
    opened = dict(entry)
    for key in ("env", "headers"):
        if isinstance(entry.get(key), dict):
            opened[key] = {name: unseal(value) for name, value in entry[key].items()}
    return opened
