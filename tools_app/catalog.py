"""The catalog: which tools a model request is offered, with what wording, bound to what.

`assemble_catalog` is pure: the caller loads every input (host config, the chat's origin, the
session's provider, registry tools, client tool lists, the agent's allowlist and permission
rules) and gets back an immutable snapshot. Filtering here is visibility, not authorisation:
a call the snapshot does not hold is refused, and a tool still checks its own grant when run.
"""
from __future__ import annotations

import fnmatch
import json
import logging
import re
from dataclasses import dataclass, field
from functools import lru_cache
from types import MappingProxyType
from typing import Any

from jsonschema import Draft202012Validator

from grants.algebra import holds

from .registry import (
    GATE_ADVANCED, GATE_ENABLED_HOOK, GATE_SESSION_GROUP, GATE_USER_CHATS, NAME_PATTERN, SHARED_ACTIONS, Tool,
)

logger = logging.getLogger(__name__)

CLIENT_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]+$")
CLIENT_TOOL_SEPARATOR = "__"
MAX_RULE_CHARS = 4096
MAX_OUTPUT_LINES = 2000
MAX_OUTPUT_BYTES = 50 * 1024
MAX_INPUT_BYTES = 256 * 1024  # a tool input, serialized as JSON
NUL_ESCAPE = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")  # \u0000 not itself behind an escaped backslash


class ToolRefusal(Exception):
    """A call the snapshot will not run; `str()` is the sentence the model sees."""

    def __init__(self, sentence, *, terminalise=False):
        super().__init__(sentence)
        self.sentence = sentence
        # True when the host must complete the call itself, naming no client as responsible.
        self.terminalise = terminalise


@dataclass(frozen=True)
class HostSwitches:
    """The HostConfig keys the catalog reads."""

    session_tools: bool = True
    session_tools_providers: tuple = ()
    advanced_tools: bool = False

    @classmethod
    def of(cls, config):
        return cls(config.session_tools, tuple(config.session_tools_providers or ()), config.advanced_tools)


@dataclass(frozen=True)
class PermissionRule:
    action: str  # glob over the permission action
    decision: str  # allow | ask | deny
    resource: str = "*"  # glob over the resource; "*" is every resource


@dataclass(frozen=True)
class CatalogInputs:
    switches: HostSwitches
    provider: str
    chat_origin_kind: str = "user"
    tools: tuple = ()  # registry tools, in registration order
    client_tools: tuple = ()  # Bindings from `client_tools(active_clients)`
    allowlist: tuple = ()  # AgentCustomization.tools; empty means no restriction
    permission_rules: tuple = ()
    client_rules: tuple = ()  # (file name, text) pairs a client published
    session: Any = None  # handed to is_enabled_for_session / for_session hooks


@dataclass(frozen=True)
class Binding:
    """What runs when the model calls `name`."""

    name: str
    tool: Tool
    client_id: str | None = None  # set for a client's tool: that client runs it
    client_tool_name: str | None = None  # the name the client announced


@dataclass(frozen=True)
class CatalogSnapshot:
    definitions: tuple  # ToolDefinition dicts, in the order the model sees them
    bindings: MappingProxyType
    server_tools: tuple  # host and plugin definitions: SessionState.serverTools
    instructions: tuple
    deferred: frozenset
    withheld_from_tool_chats: frozenset = field(default_factory=frozenset)

    @property
    def names(self):
        return [d["name"] for d in self.definitions]

    def bind(self, name):
        binding = self.bindings.get(name)
        if binding is not None:
            return binding
        if name in self.withheld_from_tool_chats:
            raise ToolRefusal(
                f"{name} is only available in chats a person started, not in this tool-started chat.",
                terminalise=True,
            )
        raise ToolRefusal(f'No tool named "{name}" is available in this chat.')

    def check_input(self, name, arguments):
        """Validate arguments against the offered input schema; refuse naming the bad field."""
        binding = self.bind(name)
        schema = binding.tool.input_schema
        if not isinstance(arguments, dict):
            raise ToolRefusal(f"Invalid input for {name} at /: expected an object.")
        problem = input_problem(name, arguments)
        if problem:
            raise ToolRefusal(problem)
        error = next(iter(sorted(Draft202012Validator(schema).iter_errors(arguments), key=lambda e: e.path)), None)
        if error is not None:
            pointer = "/" + "/".join(str(p) for p in error.absolute_path)
            raise ToolRefusal(f"Invalid input for {name} at {pointer}: {error.message}")
        return binding


def input_problem(name, arguments):
    """Why an input no tool should be handed is refused, or None: over MAX_INPUT_BYTES as JSON,
    nested past what can be walked, or holding text no database stores (NUL, lone surrogates)."""
    try:
        serialized = json.dumps(arguments)  # ASCII: lone surrogates and NUL show as escapes
    except (RecursionError, ValueError, TypeError):
        return f"Invalid input for {name}: it is not plain JSON or nests too deep."
    if len(serialized) > MAX_INPUT_BYTES:
        return f"Input for {name} refused: over {MAX_INPUT_BYTES} bytes as JSON."
    lone_surrogate = "\\ud" in serialized and not _encodable(json.dumps(arguments, ensure_ascii=False))
    if lone_surrogate or NUL_ESCAPE.search(serialized):
        return f"Invalid input for {name}: strings may not hold NUL characters or lone surrogates."
    return None


def _encodable(text):
    try:
        text.encode()
    except UnicodeEncodeError:  # a lone surrogate
        return False
    return True


def denied_everywhere(action, rules):
    """True when the last rule for `action` on every resource denies, and nothing after it
    allows or asks for some resource."""
    verdict = False
    for rule in rules:
        if not fnmatch.fnmatchcase(action, SHARED_ACTIONS.get(rule.action, rule.action)):
            continue
        if rule.resource == "*":
            verdict = rule.decision == "deny"
        elif rule.decision != "deny":
            verdict = False
    return verdict


@lru_cache(maxsize=256)
def verdicts_for(rules):
    """A per-rule-set memo of action -> hidden; an agent's rules rarely change, its tools repeat."""
    return {}


def session_tools_offered(switches, provider):
    if not switches.session_tools:
        return False
    return not switches.session_tools_providers or provider in switches.session_tools_providers


def client_tools(active_clients):
    """Each active client's announced tools as (tool named `<clientId>__<name>`, client id, the
    name it announced). Built once when a client announces, not per model request."""
    entries = []
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
                continue
            tool = Tool(
                name=full_name,
                description=definition.get("description", ""),
                title=definition.get("title"),
                input_schema=definition.get("inputSchema") or {"type": "object", "properties": {}},
                output_schema=definition.get("outputSchema"),
                annotations=definition.get("annotations"),
                availability=definition.get("availability", "session"),
                source="client",
            )
            entries.append(Binding(full_name, tool, client_id=client_id, client_tool_name=name))
    return tuple(entries)


def rule_body(file_name, text):
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


def assemble_catalog(inputs: CatalogInputs) -> CatalogSnapshot:
    switches = inputs.switches
    advanced_on = switches.advanced_tools
    session_group_on = session_tools_offered(switches, inputs.provider)
    in_tool_chat = inputs.chat_origin_kind == "tool"
    allowlist = frozenset(inputs.allowlist)
    rules = tuple(inputs.permission_rules)
    session = inputs.session

    definitions, server_tools, instructions, deferred, withheld = [], [], [], set(), set()
    bindings = {}

    # Sources in the order the model sees them: host and plugin, then clients, then MCP.
    ordered = [t.binding for t in inputs.tools if t.source != "mcp"]
    ordered.extend(inputs.client_tools)
    ordered.extend(t.binding for t in inputs.tools if t.source == "mcp")
    hidden_actions = verdicts_for(rules) if rules else None

    blocked = (0 if advanced_on else GATE_ADVANCED) | (0 if session_group_on else GATE_SESSION_GROUP)
    for binding in ordered:
        tool = binding.tool
        gate = tool.gate
        if gate & blocked:
            continue
        name = binding.name
        if allowlist and name not in allowlist:
            continue
        if hidden_actions is not None:
            action = tool.action
            hidden = hidden_actions.get(action)
            if hidden is None:
                hidden = hidden_actions[action] = denied_everywhere(action, rules)
            if hidden:
                continue
        if gate & GATE_ENABLED_HOOK and not tool.is_enabled_for_session(session):
            continue
        if gate & GATE_USER_CHATS and in_tool_chat:
            withheld.add(name)
            continue
        definition = tool.definition if tool.for_session is None else tool.wire_definition(tool.for_session(session))
        definitions.append(definition)
        bindings[name] = binding
        if tool.source == "host" or tool.source == "plugin":
            server_tools.append(definition)
        if tool.instruction:
            instructions.append(tool.instruction)
        if tool.defer_loading and (tool.defer_loading is True or tool.defer_loading(session)):
            deferred.add(name)

    for file_name, text in inputs.client_rules:
        body = rule_body(file_name, text)
        if body:
            instructions.append(body)

    return CatalogSnapshot(
        definitions=tuple(definitions),
        bindings=MappingProxyType(bindings),
        server_tools=tuple(server_tools),
        instructions=tuple(instructions),
        deferred=frozenset(deferred),
        withheld_from_tool_chats=frozenset(withheld),
    )


@dataclass(frozen=True)
class Caller:
    """Who calls a sessionless tool: the root, or a principal holding `grants`."""

    grants: tuple = ()
    is_root: bool = False
    has_users_directory: bool = True


@dataclass(frozen=True)
class SessionlessBinding:
    tool: Tool
    caller: Caller


def sessionless_tools(tools, caller):
    """The sessionless tools `caller` may see, each bound to that caller."""

    def sees(tool):
        if caller.is_root or not caller.has_users_directory or not tool.grant:
            return True
        return holds(caller.grants, tool.grant)

    return [SessionlessBinding(t, caller) for t in tools if t.sessionless and sees(t)]


def bound_output(text, full_text_uri):
    """Cut a tool's text over 2000 lines or 50 KiB; answer (text offered, whether it was cut).
    The caller keeps the full text at `full_text_uri`, which the cut text names."""
    lines = text.split("\n")
    cut = text
    if len(lines) > MAX_OUTPUT_LINES:
        cut = "\n".join(lines[:MAX_OUTPUT_LINES])
    encoded = cut.encode()
    if len(encoded) > MAX_OUTPUT_BYTES:
        cut = encoded[:MAX_OUTPUT_BYTES].decode(errors="ignore")
    if cut == text:
        return text, False
    shown_lines = cut.count("\n") + 1
    note = (
        f"\n[Output cut: showing {shown_lines} of {len(lines)} lines, {len(cut.encode())} of "
        f"{len(text.encode())} bytes. The full output is at {full_text_uri}.]"
    )
    return cut + note, True
