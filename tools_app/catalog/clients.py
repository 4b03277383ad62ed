"""What a client brings to the catalog: its announced tools and its always-applied rule files."""
import logging
import re
from collections.abc import Iterable
from typing import Any

from .hidden import HiddenTool
from .registry import AVAILABILITIES, NAME_PATTERN, Binding, Tool

logger = logging.getLogger(__name__)

CLIENT_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]+$")
CLIENT_TOOL_SEPARATOR = "__"
MAX_RULE_CHARS = 4096


def client_tools(active_clients: Iterable[dict[str, Any]]) -> tuple[Binding, ...]:
    """Each active client's announced tools as (tool named `<clientId>__<name>`, client id, the
    name it announced). Built once when a client announces, not per model request."""
    return tuple(entry for entry in client_tool_entries(active_clients) if isinstance(entry, Binding))


def client_tool_entries(active_clients: Iterable[dict[str, Any]]) -> tuple[Binding | HiddenTool, ...]:
    """A Binding for each announced tool that can be offered, a HiddenTool for each that cannot."""
    entries: list[Binding | HiddenTool] = []
    for client in active_clients:
        client_id = client.get("clientId")
        if not client_id:
            logger.warning("Dropped the tools of an active client with no clientId")
            continue
        for definition in client.get("tools") or ():
            name = definition.get("name") if isinstance(definition, dict) else None
            full_name = f"{client_id}{CLIENT_TOOL_SEPARATOR}{name}"
            if not isinstance(name, str) or not CLIENT_TOOL_NAME.match(name) or not NAME_PATTERN.match(full_name):
                logger.warning("Dropped client %s's tool %r: not a valid tool name", client_id, name)
                entries.append(HiddenTool(full_name, "client", "invalid", f"{name!r} is not a valid tool name"))
                continue
            availability = definition.get("availability", "session")
            if availability not in AVAILABILITIES:
                logger.warning("Dropped client %s's tool %s: availability %r is not one of %s",
                               client_id, name, availability, ", ".join(AVAILABILITIES))
                entries.append(HiddenTool(full_name, "client", "invalid",
                                          f"its availability {availability!r} is not one of {', '.join(AVAILABILITIES)}"))
                continue
            tool = Tool(
                name=full_name,
                description=definition.get("description", ""),
                title=definition.get("title"),
                input_schema=definition.get("inputSchema") or {"type": "object", "properties": {}},
                output_schema=definition.get("outputSchema"),
                annotations=definition.get("annotations"),
                availability=availability,
                source="client",
            )
            entries.append(Binding(full_name, tool, client_id=client_id, client_tool_name=name))
    return tuple(entries)


def rule_body(file_name: str, text: str) -> str | None:
    """The body of an always-applied rule file, or None. Frontmatter is dropped."""
    if not (file_name.endswith(".mdc") or file_name.endswith(".instructions.md")):
        return None
    if not text.startswith("---"):
        return None
    head, sep, body = text[3:].partition("\n---")
    if not sep:
        return None
    always = any(
        line.split(":", 1)[0].strip() == "alwaysApply" and line.split(":", 1)[1].strip().lower() == "true"
        for line in head.splitlines() if ":" in line
    )
    if not always:
        return None
    body = body.split("\n", 1)[1] if "\n" in body else ""
    body = body.strip()
    if len(body) > MAX_RULE_CHARS:
        logger.warning("Dropped rule %s: its body is over %d characters", file_name, MAX_RULE_CHARS)
        return None
    return body
