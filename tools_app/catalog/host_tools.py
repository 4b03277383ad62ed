"""The process-wide tool registry and its sources, in the order the model sees them: the
host's own tools, then plugins (a session's MCP servers' tools are its own: loader.py)."""
from collections.abc import Iterable

from .registry import PluginTools, Tool, ToolEditor, ToolRegistry

REGISTRY = ToolRegistry()
_HOST_TOOLS: list[Tool] = []


def _host_transform(editor: ToolEditor) -> None:
    for tool in _HOST_TOOLS:
        editor.add(tool)


REGISTRY.register(_host_transform, label="host")
PLUGINS = PluginTools(REGISTRY)


def build_host_tools(tools: Iterable[Tool]) -> None:
    """The host's own tools, listed once by ToolsAppConfig at start."""
    _HOST_TOOLS[:] = tools
    REGISTRY.reload()


register_tool = PLUGINS.register_tool
set_tools = PLUGINS.set_tools
