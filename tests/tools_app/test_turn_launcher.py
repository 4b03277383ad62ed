"""The tool families start the turns they begin through the hook the app registers at start,
and never import the runtime that runs turns (it imports them): no hidden cycle comes back."""
import re
from pathlib import Path

from tools_app import turn_launcher
from tools_app.runtime import turns

FAMILIES = Path(turn_launcher.__file__).parent / "families"
RUNTIME_IMPORT = re.compile(r"(from|import)\s+(tools_app|\.+)\.?runtime(\.(toolbox|turns|waker))?\s+import|"
                            r"from\s+(tools_app|\.+)\.?runtime\.(toolbox|turns|waker)\b")


def test_the_app_registers_the_runtimes_launcher_at_start():
    assert turn_launcher._LAUNCHER == [turns.launch_turn]


def test_no_family_imports_the_runtime_beyond_what_an_executor_is_handed():
    importing = [str(path.relative_to(FAMILIES)) for path in FAMILIES.rglob("*.py")
                 if RUNTIME_IMPORT.search(path.read_text())]
    assert importing == []
