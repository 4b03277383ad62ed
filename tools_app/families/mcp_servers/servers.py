"""Configured MCP servers: which entries are usable, and the map a session's agent is given.

A tenant's entry is `{"type": "stdio", "server": "<operator's server name>", "env"?}` or
`{"type": "http", "url", "headers"?}`. A stdio server's command is the operator's (a
`StdioServer` row or `AHP_STDIO_MCP_SERVERS`), never the tenant's or a client's: the host runs
it in the session's sandbox. Anything else is one warning in the log (naming the server and the
reason, never a credential) and is left out; the other entries still apply.
"""
import hashlib
import json
import logging
from urllib.parse import urlparse

from sandbox.sealing import unseal
from tools_app.mcp_server_entries import TENANT_COMMAND, operator_stdio_servers

logger = logging.getLogger(__name__)

PLUGIN_MCP_FILE = ".mcp.json"


def runnable_stdio(entry):
    """What the host runs for a tenant's stdio entry: the operator's server, with the tenant's
    env over the operator's. None when the operator no longer defines it."""
    defined = operator_stdio_servers().get(entry.get("server"))
    if defined is None:
        return None
    return {**defined, "env": {**(defined.get("env") or {}), **(entry.get("env") or {})}}


def _string_map(value):
    return isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())


def entry_problem(entry):
    """Why `entry` is not a usable server entry, or None when it is."""
    if not isinstance(entry, dict):
        return "an entry must be an object"
    kind = entry.get("type")
    if kind == "stdio":
        if "command" in entry or "args" in entry or "cwd" in entry:
            return TENANT_COMMAND
        if not isinstance(entry.get("server"), str) or not entry["server"]:
            return 'a stdio entry needs "server": the name of one of the operator\'s stdio servers'
        if "env" in entry and not _string_map(entry["env"]):
            return '"env" must map names to strings'
        if entry["server"] not in operator_stdio_servers():
            return f'no stdio MCP server named "{entry["server"]}" is defined on this host'
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


def plugin_manifest_uris(customizations):
    """{plugin uri: the uri of its `.mcp.json`} for each enabled Open Plugins plugin. The file is
    the client's: the host asks the client for it (resourceRead), never reads its own disk."""
    found = {}
    for plugin in customizations or ():
        if not isinstance(plugin, dict) or plugin.get("type", "plugin") != "plugin" or plugin.get("enabled") is False:
            continue
        uri = plugin.get("uri")
        if isinstance(uri, str) and uri:
            found[uri] = f"{uri.rstrip('/')}/{PLUGIN_MCP_FILE}"
    return found


def servers_of_manifest(text, plugin_uri):
    """The http servers a plugin's `.mcp.json` declares. A client's plugin never brings a
    command for the host to run: its stdio servers are left out, one warning each."""
    try:
        declared = json.loads(text).get("mcpServers") or {}
    except (ValueError, AttributeError):
        logger.warning("Could not read the MCP servers of plugin %s: its .mcp.json is not a JSON object.", plugin_uri)
        return {}
    found = {}
    for name, entry in declared.items() if isinstance(declared, dict) else ():
        if not isinstance(entry, dict):
            continue
        kind = entry.get("type") or ("stdio" if "command" in entry else "http")
        if kind != "http":
            logger.warning("Left out MCP server %r of plugin %s: a client's plugin may bring http servers only, "
                           "never a command for the host to run.", name, plugin_uri)
            continue
        found[name] = {**entry, "type": "http"}
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
