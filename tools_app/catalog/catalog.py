"""The catalog: which tools a model request is offered, with what wording, bound to what.

`assemble_catalog` is pure: the caller loads every input (host config, the chat's origin, the
session's provider, registry tools, client tool lists, the agent's allowlist and permission
rules) and gets back an immutable snapshot. Filtering here is visibility, not authorisation:
a call the snapshot does not hold is refused, and a tool still checks its own grant when run.
Every tool left out is in the snapshot's `hidden` with the rule that left it out, so the
operators' explainer shows exactly what the model is (not) offered.
"""
from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import chain
from operator import attrgetter
from types import MappingProxyType
from typing import Any

from grants.algebra import holds

from .clients import rule_body
from .hidden import HiddenTool
from .registry import (
    GATE_ADVANCED,
    GATE_ENABLED_HOOK,
    GATE_SESSION_GROUP,
    GATE_USER_CHATS,
    SHARED_ACTIONS,
    Binding,
    CatalogRow,
    Tool,
)
from .validation import ToolRefusal, input_problem, input_validator


@dataclass(frozen=True)
class HostSwitches:
    """The HostConfig keys the catalog reads, and the deadline it gives a client's calls."""

    session_tools: bool = True
    session_tools_providers: tuple = ()
    advanced_tools: bool = False
    without_host_tools: tuple = ()  # providers whose plugins.<name>.hostTools is false
    client_tool_timeout_ms: int = 0  # 0 waits for ever

    @classmethod
    def of(cls, config: Any) -> HostSwitches:
        return cls(config.session_tools, tuple(config.session_tools_providers or ()), config.advanced_tools,
                   tuple(sorted(name for name, settings in (config.plugins or {}).items()
                                if settings.get("hostTools") is False)), config.client_tool_timeout_ms)


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
    tools: tuple[Tool, ...] = ()  # registry tools, in registration order
    client_tools: tuple[Binding, ...] = ()  # from `client_tools(active_clients)`
    invalid_tools: tuple[HiddenTool, ...] = ()  # tools whose definitions could not be offered at all
    allowlist: tuple[str, ...] | None = None  # the only names offered (an agent definition's); None restricts nothing
    permission_rules: tuple[PermissionRule, ...] = ()
    client_rules: tuple[tuple[str, str], ...] = ()  # (file name, text) pairs a client published
    session: Any = None  # handed to is_enabled_for_session / for_session hooks


@dataclass(frozen=True)
class CatalogSnapshot:
    definitions: tuple  # ToolDefinition dicts, in the order the model sees them
    bindings: MappingProxyType
    server_tools: tuple  # host and plugin definitions: SessionState.serverTools
    instructions: tuple
    deferred: frozenset
    withheld_from_tool_chats: frozenset = field(default_factory=frozenset)
    hidden: tuple = ()  # HiddenTools: invalid definitions, then the rest in the order the model sees tools
    # How long a client may take to run one of its tools (0: for ever): HostConfig's, kept with the
    # snapshot, whose stamp is the config's, so a call's begin reads no config of its own.
    client_tool_timeout_ms: int = 0
    # name -> the validator of the input schema this session was offered, for each tool whose
    # per-session wording changed it (rename_chat without `automatic`): a call is checked
    # against what the model saw, not the tool's base schema.
    offered_validators: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))

    @property
    def names(self) -> list[str]:
        return [d["name"] for d in self.definitions]

    def bind(self, name: str) -> Binding:
        binding = self.bindings.get(name)
        if binding is not None:
            return binding
        if name in self.withheld_from_tool_chats:
            raise ToolRefusal(
                f"{name} is only available in chats a person started, not in this tool-started chat.",
                terminalise=True,
            )
        raise ToolRefusal(f'No tool named "{name}" is available in this chat.')

    def check_input(self, name: str, arguments: Any) -> Binding:
        """Validate arguments against the offered input schema; refuse naming the bad field."""
        binding = self.bind(name)
        if not isinstance(arguments, dict):
            raise ToolRefusal(f"Invalid input for {name} at /: expected an object.")
        problem = input_problem(name, arguments)
        if problem:
            raise ToolRefusal(problem)
        validator = self.offered_validators.get(name) or binding.tool.input_validator
        error = next(iter(sorted(validator.iter_errors(arguments), key=lambda e: e.path)), None)
        if error is not None:
            pointer = "/" + "/".join(str(p) for p in error.absolute_path)
            raise ToolRefusal(f"Invalid input for {name} at {pointer}: {error.message}")
        return binding


def denied_everywhere(action: str, rules: Iterable[PermissionRule]) -> bool:
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


class Verdicts(dict[str, bool]):
    """action -> whether `rules` deny it everywhere, each worked out on first lookup."""

    def __init__(self, rules: tuple[PermissionRule, ...]) -> None:
        super().__init__()
        self.rules = rules

    def __missing__(self, action: str) -> bool:
        denied = self[action] = denied_everywhere(action, self.rules)
        return denied


@lru_cache(maxsize=256)
def verdicts_for(rules: tuple[PermissionRule, ...]) -> Verdicts:
    """A per-rule-set memo; an agent's rules rarely change, its tools repeat."""
    return Verdicts(rules)


@lru_cache(maxsize=256)
def allowed_names(allowlist: tuple[str, ...]) -> frozenset[str]:
    """An agent's allowlist as a set, built once per allowlist rather than per model request."""
    return frozenset(allowlist)


# The last tools tuple split by source: (tools, host-and-plugin rows, MCP rows). A chat without
# MCP servers is handed the registry's own tuple, the same object until the registry reloads.
_last_split: tuple[tuple[Tool, ...] | None, tuple[CatalogRow, ...], tuple[CatalogRow, ...]] = (None, (), ())


def rows_by_source(tools: tuple[Tool, ...]) -> tuple[tuple[CatalogRow, ...], tuple[CatalogRow, ...]]:
    """The catalog rows of `tools`' host and plugin tools, and of its MCP tools, each in order."""
    global _last_split
    last = _last_split
    if last[0] is tools:
        return last[1], last[2]
    own = tuple(t.binding.catalog_row for t in tools if t.source != "mcp")
    mcp = tuple(t.binding.catalog_row for t in tools if t.source == "mcp")
    _last_split = (tools, own, mcp)
    return own, mcp


CATALOG_ROW = attrgetter("catalog_row")

# The gates checked after the allowlist and permission rules, against this session and chat.


def session_tools_offered(switches: HostSwitches, provider: str) -> bool:
    if not switches.session_tools:
        return False
    return not switches.session_tools_providers or provider in switches.session_tools_providers


@dataclass(frozen=True)
class Screens:
    """What hides a row of a catalog being assembled, worked out once per catalog."""

    inputs: CatalogInputs
    blocked: int
    allowlist: frozenset[str] | None
    hidden_actions: Any
    host_tools_on: bool
    in_tool_chat: bool

    @classmethod
    def of(cls, inputs: CatalogInputs) -> "Screens":
        switches, rules = inputs.switches, tuple(inputs.permission_rules)
        blocked = ((0 if switches.advanced_tools else GATE_ADVANCED)
                   | (0 if session_tools_offered(switches, inputs.provider) else GATE_SESSION_GROUP))
        return cls(inputs, blocked,
                   None if inputs.allowlist is None else allowed_names(tuple(inputs.allowlist)),
                   verdicts_for(rules) if rules else None,
                   inputs.provider not in switches.without_host_tools,
                   inputs.chat_origin_kind == "tool")

    def hiding(self, row: CatalogRow) -> HiddenTool | None:
        """The first rule that hides `row` from this catalog, or None when it is offered."""
        binding, name, source, gate, action = row[:5]
        if not self.host_tools_on and source == "host":
            return HiddenTool(name, source, "host_tools_off", self.inputs.provider)
        if gate & self.blocked:
            if gate & self.blocked & GATE_ADVANCED:
                return HiddenTool(name, source, "advanced")
            if not self.inputs.switches.session_tools:
                return HiddenTool(name, source, "session_tools_off")
            return HiddenTool(name, source, "provider_scoping", self.inputs.provider)
        if self.allowlist is not None and name not in self.allowlist:
            return HiddenTool(name, source, "allowlist")
        if self.hidden_actions is not None and self.hidden_actions[action]:
            return HiddenTool(name, source, "permission_rule", action)
        enabled = binding.tool.is_enabled_for_session
        if gate & GATE_ENABLED_HOOK and enabled is not None and not enabled(self.inputs.session):
            return HiddenTool(name, source, "not_enabled")
        if gate & GATE_USER_CHATS and self.in_tool_chat:
            return HiddenTool(name, source, "tool_chat")
        return None


def assemble_catalog(inputs: CatalogInputs) -> CatalogSnapshot:
    session, screens = inputs.session, Screens.of(inputs)
    definitions, server_tools, instructions, deferred, withheld = [], [], [], set(), set()
    bindings, offered_validators = {}, {}

    # Sources in the order the model sees them: host and plugin, then clients, then MCP.
    own_rows, mcp_rows = rows_by_source(inputs.tools)
    hidden = list(inputs.invalid_tools)
    for row in chain(own_rows, map(CATALOG_ROW, inputs.client_tools), mcp_rows):
        binding, name, source, gate, action, definition, for_session, instruction, defer_loading, serves = row
        screened = screens.hiding(row)
        if screened is not None:
            hidden.append(screened)
            if screened.rule == "tool_chat":
                withheld.add(name)
            continue
        if for_session is not None:
            definition = binding.tool.wire_definition(for_session(session))
            if definition.get("inputSchema") is not binding.tool.input_schema:
                offered_validators[name] = input_validator(definition["inputSchema"])
        definitions.append(definition)
        bindings[name] = binding
        if serves:
            server_tools.append(definition)
        if instruction:
            instructions.append(instruction)
        if defer_loading and (defer_loading is True or defer_loading(session)):
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
        offered_validators=MappingProxyType(offered_validators),
        hidden=tuple(hidden),
        client_tool_timeout_ms=inputs.switches.client_tool_timeout_ms,
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


def sessionless_tools(tools: Iterable[Tool], caller: Caller) -> list[SessionlessBinding]:
    """The sessionless tools `caller` may see, each bound to that caller."""

    def sees(tool: Tool) -> bool:
        if caller.is_root or not caller.has_users_directory or not tool.grant:
            return True
        return holds(caller.grants, tool.grant)

    return [SessionlessBinding(t, caller) for t in tools if t.sessionless and sees(t)]


