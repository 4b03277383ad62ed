"""Agent definitions as documents: the JSON Schema gate, and the pure translation of the
`github-cli-builtin-tools` entry into the GitHub Copilot SDK's tool filter lists.

Nothing here touches the database or the network; the model, the admin, the REST views and the
provider all come through these functions.
"""
import json
import logging
from collections import defaultdict
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Literal

from copilot import BUILTIN_TOOLS_ISOLATED, ToolSet
from jsonschema import Draft202012Validator

logger = logging.getLogger(__name__)

SCHEMA_PATH = Path(__file__).resolve().parent / "schemas" / "agent_definition.json"
BUILTIN_TOOLS_KIND = "github-cli-builtin-tools"
SOURCES = ("builtin", "custom", "mcp")

ClientMode = Literal["empty", "copilot-cli"]


class AgentDefinitionInvalid(ValueError):
    """A definition the host refuses; `pointer` is the JSON pointer of the offending value."""

    def __init__(self, pointer, message):
        super().__init__(f"{pointer}: {message}" if pointer else message)
        self.pointer = pointer
        self.message = message

    @property
    def field(self):
        """The top-level key the pointer falls under ('' for the document itself)."""
        return self.pointer.split("/")[1] if self.pointer else ""


# --- the schema gate -----------------------------------------------------------------------

@cache
def _validator():
    schema = json.loads(SCHEMA_PATH.read_text())
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def json_pointer(path):
    return "".join("/" + str(part).replace("~", "~0").replace("/", "~1") for part in path)


def _names_another_kind(error):
    """True when this error only says "this anyOf branch is for another kind"."""
    return error.validator == "not" or (error.validator == "const" and list(error.relative_path) == ["kind"])


def _most_precise(error):
    """Descend through anyOf/oneOf to the error of the one branch the value was meant for.

    jsonschema's own best_match may stop at "is not valid under any of the given schemas" or
    wander into the branch of another `kind`; an author needs the deepest error of their kind.
    """
    while error.context:
        branches = defaultdict(list)
        for child in error.context:
            branches[child.relative_schema_path[0]].append(child)
        live = [errs for errs in branches.values() if not any(_names_another_kind(e) for e in errs)]
        if len(live) > 1:
            # A selector form whose own key is missing ("required" at its root) was not meant.
            meant = [errs for errs in live if not any(e.validator == "required" and not e.relative_path for e in errs)]
            live = meant or live
        if len(live) != 1:
            break  # several branches fit equally: the parent's message is the honest one
        error = max(live[0], key=lambda e: (len(e.absolute_path), bool(e.context)))
    return error


def validate_definition(document):
    """Raise AgentDefinitionInvalid for the first schema error, else answer the document."""
    error = next(iter(_validator().iter_errors(document)), None)
    if error is not None:
        error = _most_precise(error)
        raise AgentDefinitionInvalid(json_pointer(error.absolute_path), error.message)
    check_single_builtin_tools_entry(document)
    return document


def check_single_builtin_tools_entry(document):
    indexes = [i for i, entry in enumerate(_tools(document)) if _is_builtin_tools(entry)]
    if len(indexes) > 1:
        raise AgentDefinitionInvalid(
            f"/tools/{indexes[1]}", f"An agent definition may hold only one {BUILTIN_TOOLS_KIND} entry."
        )


def _tools(document):
    return document.get("tools") or []


def _is_builtin_tools(entry):
    return isinstance(entry, dict) and entry.get("kind") == BUILTIN_TOOLS_KIND


def host_side_tools(document):
    """The tools[] entries the host turns into tools of its own; the built-in policy is not one."""
    return [entry for entry in _tools(document) if not _is_builtin_tools(entry)]


# --- typed entry and its resolution --------------------------------------------------------

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
    for index, entry in enumerate(_tools(document)):
        if _is_builtin_tools(entry):
            return f"/tools/{index}", entry
    return None, None


def builtin_tools_pointer(document):
    return _builtin_tools_entry(document)[0]


def builtin_tool_policy(document):
    """The policy of a whole definition: from its one built-in tools entry, or the SDK defaults."""
    pointer, entry = _builtin_tools_entry(document)
    return resolve_builtin_tool_policy(None if entry is None else BuiltinToolsEntry.from_json(entry, pointer))


# --- what the catalog takes from a definition ----------------------------------------------

def catalog_allowlist(document, tools):
    """The names of the registry `tools` the definition's host-side entries name: a generic
    entry's kind is a tool's name; an `mcp` entry names its server's tools, or only its
    `allowedTools`. Empty when no entry names a tool (the catalog then restricts nothing)."""
    names = []
    for entry in host_side_tools(document):
        kind = entry.get("kind")
        if kind == "mcp":
            allowed = entry.get("allowedTools")
            names.extend(
                tool.effective_name for tool in tools
                if tool.source == "mcp" and tool.namespace == entry.get("serverName")
                and (allowed is None or tool.name in allowed)
            )
        elif kind != "agent-definition":  # another agent is not a registry tool
            names.append(kind)
    return tuple(names)


def excluded_host_tools(document):
    """The host's tools the built-in tools entry excludes, as permission actions: the Copilot
    SDK calls the tools a host gives a session `custom:<name>`, and `custom:*` excludes them all."""
    _, entry = _builtin_tools_entry(document)
    excluded = (entry or {}).get("excluded-tools") or {}
    return tuple(name.partition(":")[2] for name in excluded.get("tools") or () if name.startswith("custom:"))
