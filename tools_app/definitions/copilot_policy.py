"""The Copilot built-in tool policy: the pure translation of an agent definition's
`github-cli-builtin-tools` entry into the GitHub Copilot SDK's tool filter lists."""
import logging
from dataclasses import dataclass
from typing import Literal

from copilot import BUILTIN_TOOLS_ISOLATED, ToolSet

from .agent_definitions import AgentDefinitionInvalid, check_single_builtin_tools_entry, is_builtin_tools, tool_entries

logger = logging.getLogger(__name__)

SOURCES = ("builtin", "custom", "mcp")

ClientMode = Literal["empty", "copilot-cli"]


@dataclass(frozen=True)
class ToolSelector:
    """`{"tools": [...]}` or `{"isolated": true}`; an in-memory selector may carry both."""

    tools: tuple[str, ...] | None = None
    isolated: bool = False

    @classmethod
    def from_json(cls, value):
        if value is None:
            return None
        tools = value.get("tools")
        return cls(tools=None if tools is None else tuple(tools), isolated=value.get("isolated") is True)


@dataclass(frozen=True)
class BuiltinToolsEntry:
    available: ToolSelector | None = None
    excluded: ToolSelector | None = None
    client_mode: ClientMode = "copilot-cli"
    pointer: str = ""  # where the entry sits in its definition, for refusals

    @classmethod
    def from_json(cls, entry, pointer=""):
        return cls(
            available=ToolSelector.from_json(entry.get("available-tools")),
            excluded=ToolSelector.from_json(entry.get("excluded-tools")),
            client_mode=entry.get("client-mode", "copilot-cli"),
            pointer=pointer,
        )


@dataclass(frozen=True)
class CopilotBuiltinToolPolicy:
    """What the SDK is told: None leaves its field unset (the SDK's default)."""

    available_tools: list[str] | None = None
    excluded_tools: list[str] | None = None
    client_mode: ClientMode = "copilot-cli"


EMPTY_MODE_NEEDS_TOOLS = (
    "client-mode empty needs a non-empty available-tools: an empty-mode Copilot client offers no tool "
    "the definition does not name."
)


def _selected_names(selector, slot):
    if selector.tools is not None:
        if selector.isolated:
            logger.warning("%s: both tools and isolated are set; tools wins.", slot)
        return list(selector.tools)
    if selector.isolated:
        return list(BUILTIN_TOOLS_ISOLATED)
    return None  # a selector naming nothing leaves the slot unset


def _is_qualified(name):
    source, colon, _ = name.partition(":")
    return bool(colon) and source in SOURCES


def _tool_set(names, slot):
    """Bare names and `*` govern built-ins; `source:name` keeps its source. The SDK's own
    builder checks every name, so nothing it would refuse (a bare `*`) reaches a session."""
    tool_set = ToolSet()
    for name in names:
        source, _, rest = name.partition(":") if _is_qualified(name) else ("builtin", "", name)
        try:
            getattr(tool_set, f"add_{source}")(rest)
        except ValueError as error:
            raise AgentDefinitionInvalid(slot, str(error)) from None
    return tool_set


def resolve_builtin_tool_policy(entry):
    """The pure translation of one `github-cli-builtin-tools` entry (or None) for the SDK."""
    if entry is None:
        return CopilotBuiltinToolPolicy()
    slot = f"{entry.pointer}/available-tools"
    wanted = None if entry.available is None else _selected_names(entry.available, slot)
    if entry.client_mode == "empty" and not wanted:
        # The schema's if/then says the same; this catches a definition that bypassed it.
        raise AgentDefinitionInvalid(slot, EMPTY_MODE_NEEDS_TOOLS)
    available = None
    # The sole wildcard is the SDK's default, so it stays unset; not in empty mode, whose
    # default is no tool at all and where the SDK insists on a list.
    if wanted is not None and (wanted != ["*"] or entry.client_mode == "empty"):
        tool_set = _tool_set(wanted, slot)
        if not any(_is_qualified(name) for name in wanted):
            # Only built-ins were named: the author governs built-ins and keeps the rest.
            tool_set.add_custom("*").add_mcp("*")
        available = tool_set.to_list()
    slot = f"{entry.pointer}/excluded-tools"
    unwanted = None if entry.excluded is None else _selected_names(entry.excluded, slot)
    excluded = None if unwanted is None else _tool_set(unwanted, slot).to_list()
    return CopilotBuiltinToolPolicy(available, excluded, entry.client_mode)


def _builtin_tools_entry(document):
    """(pointer, entry) of the definition's one built-in tools entry, or (None, None)."""
    check_single_builtin_tools_entry(document)
    for index, entry in enumerate(tool_entries(document)):
        if is_builtin_tools(entry):
            return f"/tools/{index}", entry
    return None, None


def builtin_tools_pointer(document):
    return _builtin_tools_entry(document)[0]


def builtin_tool_policy(document):
    """The policy of a whole definition: from its one built-in tools entry, or the SDK defaults."""
    pointer, entry = _builtin_tools_entry(document)
    return resolve_builtin_tool_policy(None if entry is None else BuiltinToolsEntry.from_json(entry, pointer))


def excluded_host_tools(document):
    """The host's tools the built-in tools entry excludes, as permission actions: the Copilot
    SDK calls the tools a host gives a session `custom:<name>`, and `custom:*` excludes them all."""
    _, entry = _builtin_tools_entry(document)
    excluded = (entry or {}).get("excluded-tools") or {}
    return tuple(name.partition(":")[2] for name in excluded.get("tools") or () if name.startswith("custom:"))
