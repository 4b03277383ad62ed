"""Agent definitions as documents: the JSON Schema gate (schemas/agent_definition.json).

Nothing here touches the database or the network; the model, the admin and the REST views all
come through these functions.
"""
import json
from collections import defaultdict
from functools import cache
from pathlib import Path

from jsonschema import Draft202012Validator

SCHEMA_PATH = Path(__file__).resolve().parent / "schemas" / "agent_definition.json"
BUILTIN_TOOLS_KIND = "github-cli-builtin-tools"


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
    indexes = [i for i, entry in enumerate(tool_entries(document)) if is_builtin_tools(entry)]
    if len(indexes) > 1:
        raise AgentDefinitionInvalid(
            f"/tools/{indexes[1]}", f"An agent definition may hold only one {BUILTIN_TOOLS_KIND} entry."
        )


def tool_entries(document):
    return document.get("tools") or []


def is_builtin_tools(entry):
    return isinstance(entry, dict) and entry.get("kind") == BUILTIN_TOOLS_KIND


def host_side_tools(document):
    """The tools[] entries the host turns into tools of its own; the built-in policy is not one."""
    return [entry for entry in tool_entries(document) if not is_builtin_tools(entry)]


def catalog_allowlist(document, tools):
    """The names of the registry `tools` the definition's host-side entries name: a generic
    entry's kind is a tool's name; an `mcp` entry names its server's tools, or only its
    `allowedTools`. None when no entry names a tool (the catalog then restricts nothing); an `mcp`
    entry whose server offers nothing (unlisted, unavailable) names nothing, never everything."""
    names, restricts = [], False
    for entry in host_side_tools(document):
        kind = entry.get("kind")
        if kind == "agent-definition":  # another agent is not a registry tool
            continue
        restricts = True
        if kind == "mcp":
            allowed = entry.get("allowedTools")
            names.extend(
                tool.effective_name for tool in tools
                if tool.source == "mcp" and tool.namespace == entry.get("serverName")
                and (allowed is None or tool.name in allowed)
            )
        else:
            names.append(kind)
    return tuple(names) if restricts else None
