"""The tool registry: producers register transforms that add complete tools through an editor.

The registry's tool list is rebuilt by replaying every active transform in registration order,
so disposing one reveals whatever it overrode, and the latest valid registration of an
effective name wins. Nothing here does I/O.
"""
from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any, Callable, NamedTuple

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from .validation import input_validator

logger = logging.getLogger(__name__)

NAME_PATTERN = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
EFFECTS = frozenset({"reads", "writes", "network", "destructive"})
AVAILABILITIES = ("session", "userChats")
EMPTY_OBJECT_SCHEMA = {"type": "object", "properties": {}}


# Bits of Tool.gate: which of the catalog's conditional rules apply to a tool at all.
GATE_ADVANCED = 1
GATE_SESSION_GROUP = 2
GATE_ENABLED_HOOK = 4
GATE_USER_CHATS = 8
# Actions that share one permission: a rule on `edit` covers writing and patching too.
SHARED_ACTIONS = {"write": "edit", "patch": "edit"}


class InvalidTool(ValueError):
    pass


@dataclass(frozen=True)
class Tool:
    """One tool, whoever produced it: its definition, its visibility flags and its executor."""

    name: str
    description: str = ""
    input_schema: dict = field(default_factory=lambda: dict(EMPTY_OBJECT_SCHEMA))
    executor: Callable[..., Any] | None = None
    title: str | None = None
    output_schema: dict | None = None
    annotations: dict | None = None
    namespace: str | None = None
    permission_action: str | None = None
    availability: str = "session"
    advanced_permission: bool = False
    sessionless: bool = False
    grant: str | None = None
    effects: frozenset = frozenset()
    instruction: str | None = None
    defer_loading: bool | Callable[[Any], bool] = False  # a hook answers per session
    is_enabled_for_session: Callable[[Any], bool] | None = None
    for_session: Callable[[Any], dict] | None = None
    source: str = "host"  # host | plugin | client | mcp
    group: str | None = None  # "session" for the fourteen session tools

    # Cached: the catalog reads these for every tool of every model request.
    @cached_property
    def effective_name(self) -> str:
        if not self.namespace:
            return self.name
        return f"{self.namespace.replace('.', '_')}_{self.name}"

    def validate(self) -> Tool:
        if not NAME_PATTERN.match(self.effective_name):
            raise InvalidTool(f"Tool name {self.effective_name!r} must match {NAME_PATTERN.pattern}")
        if self.availability not in AVAILABILITIES:
            raise InvalidTool(f"{self.effective_name}: availability must be one of {AVAILABILITIES}")
        if not set(self.effects) <= EFFECTS:
            raise InvalidTool(f"{self.effective_name}: unknown effects {sorted(set(self.effects) - EFFECTS)}")
        if not isinstance(self.description, str):
            raise InvalidTool(f"{self.effective_name}: description must be a string")
        for label, schema in (("input", self.input_schema), ("output", self.output_schema)):
            if schema is None and label == "output":
                continue
            if not isinstance(schema, dict) or schema.get("type") != "object":
                raise InvalidTool(f"{self.effective_name}: the {label} schema must be an object schema")
            try:
                Draft202012Validator.check_schema(schema)
            except SchemaError as exc:
                raise InvalidTool(f"{self.effective_name}: invalid {label} schema: {exc.message}") from None
        return self

    @cached_property
    def definition(self) -> dict[str, Any]:
        """The AHP ToolDefinition offered on the wire (host-side hints such as defer_loading stay
        here). Shared by every snapshot: treat it as read-only."""
        definition = {"name": self.effective_name, "description": self.description, "inputSchema": self.input_schema}
        if self.title:
            definition["title"] = self.title
        if self.output_schema:
            definition["outputSchema"] = self.output_schema
        if self.annotations:
            definition["annotations"] = self.annotations
        if self.availability != "session":
            definition["availability"] = self.availability
        return definition

    @cached_property
    def input_validator(self) -> Draft202012Validator:
        """The compiled validator of `input_schema`, looked up once per tool, not per call."""
        return input_validator(self.input_schema)

    @cached_property
    def gate(self) -> int:
        return (
            (GATE_ADVANCED if self.advanced_permission else 0)
            | (GATE_SESSION_GROUP if self.group == "session" else 0)
            | (GATE_ENABLED_HOOK if self.is_enabled_for_session is not None else 0)
            | (GATE_USER_CHATS if self.availability == "userChats" else 0)
        )

    @cached_property
    def action(self) -> str:
        """The permission action rules match: its own, else its effective name."""
        action = self.permission_action or self.effective_name
        return SHARED_ACTIONS.get(action, action)

    @cached_property
    def binding(self) -> Binding:
        """The snapshot's binding of this tool: itself, under its effective name."""
        return Binding(self.effective_name, self)

    def wire_definition(self, wording: dict[str, Any] | None = None) -> dict[str, Any]:
        """The definition with per-session wording merged over it."""
        return {**self.definition, **wording} if wording else self.definition


@dataclass(frozen=True)
class Binding:
    """What runs when the model calls `name`."""

    name: str
    tool: Tool
    client_id: str | None = None  # set for a client's tool: that client runs it
    client_tool_name: str | None = None  # the name the client announced

    @cached_property
    def catalog_row(self) -> CatalogRow:
        """What `assemble_catalog` reads of this binding, in one row: unpacking it per model
        request costs a fraction of the attribute lookups it replaces."""
        tool = self.tool
        return CatalogRow(self, self.name, tool.source, tool.gate, tool.action, tool.definition, tool.for_session,
                          tool.instruction, tool.defer_loading, tool.source == "host" or tool.source == "plugin")


class CatalogRow(NamedTuple):
    """A binding as `assemble_catalog` reads it, made once per binding."""

    binding: Binding
    name: str
    source: str
    gate: int  # the GATE_* bits of its tool
    action: str  # the permission action rules match
    definition: dict[str, Any]
    for_session: Callable[[Any], dict] | None  # the per-session wording hook
    instruction: str | None
    defer_loading: bool | Callable[[Any], bool]
    serves: bool  # a host or plugin tool: listed in the session's serverTools


class ToolEditor:
    """What a transform sees: add, update and remove by effective name, and namespaces."""

    def __init__(self, tools: dict[str, Tool], namespaces: dict[str, str], label: str) -> None:
        self._tools = tools
        self._namespaces = namespaces
        self._label = label

    def add(self, tool: Tool) -> None:
        try:
            tool.validate()
        except InvalidTool as exc:
            logger.warning("Skipped a tool from %s: %s", self._label, exc)
            return
        self._tools[tool.effective_name] = tool

    def update(self, name: str, /, **changes: Any) -> None:
        current = self._tools.get(name)
        if current is None:
            return
        changes.pop("name", None)
        changes.pop("namespace", None)
        try:
            self._tools[name] = replace(current, **changes).validate()
        except (InvalidTool, TypeError) as exc:
            logger.warning("Ignored an update of %s from %s: %s", name, self._label, exc)

    def remove(self, name: str) -> None:
        self._tools.pop(name, None)

    def namespace(self, name: str, description: str) -> None:
        self._namespaces.setdefault(name, description)


Transform = Callable[[ToolEditor], None]


class Registration:
    def __init__(self, registry: ToolRegistry, transform: Transform, label: str) -> None:
        self._registry = registry
        self.transform = transform
        self.label = label
        self.active = True

    def dispose(self) -> None:
        """Remove this transform and rebuild from the rest. Idempotent."""
        if self.active:
            self.active = False
            self._registry.reload()


class ToolRegistry:
    def __init__(self) -> None:
        self._registrations: list[Registration] = []
        self._lock = threading.RLock()
        self._listeners: list[Callable[[ToolRegistry], None]] = []
        self.tools: tuple[Tool, ...] = ()
        self.namespaces: dict[str, str] = {}

    def register(self, transform: Transform, label: str | None = None) -> Registration:
        """Add `transform(editor)` after every earlier one; answer its disposable handle."""
        with self._lock:
            registration = Registration(self, transform, label or str(getattr(transform, "__name__", "transform")))
            self._registrations.append(registration)
        self.reload()
        return registration

    def reload(self) -> None:
        """Rebuild from every active transform, reading their sources again, in the same order."""
        with self._lock:
            tools: dict[str, Tool] = {}
            namespaces: dict[str, str] = {}
            for registration in self._registrations:
                if not registration.active:
                    continue
                try:
                    registration.transform(ToolEditor(tools, namespaces, registration.label))
                except Exception:
                    logger.exception("Transform %s failed; the tools it added so far stay", registration.label)
            changed = tuple(tools.values()) != self.tools
            self.tools = tuple(tools.values())
            self.namespaces = namespaces
        if changed:
            for listener in list(self._listeners):
                listener(self)

    def on_change(self, listener: Callable[[ToolRegistry], None]) -> Callable[[], None]:
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    def get(self, effective_name: str) -> Tool | None:
        return next((t for t in self.tools if t.effective_name == effective_name), None)


class PluginTools:
    """The plugins' source: `register_tool` appends, `set_tools` replaces the list whole."""

    def __init__(self, registry: ToolRegistry) -> None:
        self._tools: list[Tool] = []
        self._registry = registry
        self.handle = registry.register(self._transform, label="plugins")

    def _transform(self, editor: ToolEditor) -> None:
        for tool in self._tools:
            editor.add(replace(tool, source="plugin"))

    def register_tool(self, tool: Tool) -> None:
        self._tools.append(tool)
        self._registry.reload()

    def set_tools(self, tools: Iterable[Tool]) -> None:
        self._tools = list(tools)
        self._registry.reload()
