"""HostConfig's `mcpServers`: the one check of its entries, run at every door (REST,
root/configChanged, the admin's rows), so a value one door refuses no other stores. A tenant's
entry is `{"type": "stdio", "server": "<an operator's stdio server>", "env"?}` or
`{"type": "http", "url", "headers"?}`; each refusal is a sentence naming the server and field."""
import re
from typing import Any

from django.apps import apps
from django.conf import settings

from .credentials import is_http_url

WIRE = "mcpServers"
NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
NOT_A_NAME = f"{WIRE}: a server name is 1 to 64 letters, digits, _ and -."
TENANT_COMMAND = ("a tenant cannot name a command for the host to run; pick one of the operator's stdio servers "
                  'with {"type": "stdio", "server": "<name>"}')
# The fields of one type that the other does not take.
OWN_FIELDS = {"stdio": ("server", "env"), "http": ("url", "headers")}
Problem = tuple[str | None, str]  # the entry's field it is about (None: the whole entry), the sentence


def operator_stdio_servers():
    """{name: {"command", "args", "env", "readOnlyPaths"}}: the settings' servers, then the
    superuser's rows over them."""
    # The row's model by name: its module imports tools_app.config, which imports this one.
    rows = apps.get_model("tools_app", "StdioServer").objects.all()
    return {**settings.AHP_STDIO_MCP_SERVERS, **{row.name: row.to_entry() for row in rows}}


def _string_map(value):
    return isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())


def server_problem(name: object, entry: object) -> Problem | None:
    """(the entry's field it is about, or None; the sentence) when `entry` may not be stored as
    server `name`, else None."""
    if not isinstance(name, str) or not NAME.match(name):
        return "name", NOT_A_NAME
    where = f"{WIRE}.{name}"
    if not isinstance(entry, dict):
        return None, f"{where} must be an object."
    if {"command", "args", "cwd"} & set(entry):
        return None, f"{where}: {TENANT_COMMAND}."
    kind = entry.get("type")
    if kind not in OWN_FIELDS:
        return "type", f'{where}.type must be "stdio" or "http".'
    for other, fields in OWN_FIELDS.items():
        for field in fields if other != kind else ():
            if field in entry:
                return field, f"{where}.{field} is for {other} servers."
    return _stdio_problem(where, entry) if kind == "stdio" else _http_problem(where, entry)


def _stdio_problem(where: str, entry: dict[str, Any]) -> Problem | None:
    if not isinstance(entry.get("server"), str) or entry["server"] not in operator_stdio_servers():
        return "server", f"{where}.server must name one of the operator's stdio servers."
    if "env" in entry and not _string_map(entry["env"]):
        return "env", f"{where}.env must map names to strings."
    return None


def _http_problem(where: str, entry: dict[str, Any]) -> Problem | None:
    if not is_http_url(entry.get("url")):
        return "url", f"{where}.url must be an http or https URL."
    if "headers" in entry and not _string_map(entry["headers"]):
        return "headers", f"{where}.headers must map names to strings."
    return None


def check_mcp_servers(value):
    """None if `value` is a valid mcpServers object, else the sentence naming what is wrong."""
    if value is None:
        return None
    if not isinstance(value, dict):
        return f"{WIRE} must be an object mapping server names to server entries."
    for name, entry in value.items():
        problem = server_problem(name, entry)
        if problem:
            return problem[1]
    return None
