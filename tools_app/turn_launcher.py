"""How a tool family starts a turn it began (a wakeup's, a message a tool sent) without importing
the runtime that runs it, which imports the families: the runtime's launcher is registered here
at app start (ToolsAppConfig.ready)."""
from collections.abc import Callable
from typing import Any

TurnLauncher = Callable[[Any], None]

_LAUNCHER: list[TurnLauncher] = []


def set_turn_launcher(launcher: TurnLauncher) -> None:
    _LAUNCHER[:] = [launcher]


def launch_turn(turn_id: Any) -> None:
    """Run the turn `turn_id` as the runtime runs a turn the host began."""
    if not _LAUNCHER:
        raise RuntimeError("No turn launcher is registered: tools_app's AppConfig.ready registers it.")
    _LAUNCHER[0](turn_id)
