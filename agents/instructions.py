"""What a harness agent is told besides the person's message: which session it serves, the
instructions of the tools its chat's snapshot holds, the rules the session's clients published
(both the snapshot's `instructions`), which tools are for occasional use (the catalog's
`deferLoading`), where a session without a folder starts, then its agent definition's own
instructions."""
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sessions_app.models import Session
    from tools_app.catalog.catalog import CatalogSnapshot
    from tools_app.models import AgentDefinition

SET_WORKSPACE_HINT = ("This session has no working directory yet: call set_workspace with the folder to work in "
                      "before you work on files.")


def tool_hints(session: "Session", snapshot: "CatalogSnapshot") -> list[str]:
    """The catalog's deferred tools named (each harness is offered every tool; these are the ones
    to reach for only when a task needs them), and set_workspace for a session without a folder."""
    hints = []
    deferred = [name for name in snapshot.names if name in snapshot.deferred]
    if deferred:
        hints.append("These tools are for occasional use; reach for them only when a task needs them: "
                     f"{', '.join(deferred)}.")
    if not session.working_directories and "set_workspace" in snapshot.names:
        hints.append(SET_WORKSPACE_HINT)
    return hints


def session_instructions(session: "Session", snapshot: "CatalogSnapshot",
                         definition: "AgentDefinition | None" = None) -> str:
    return "\n\n".join([f"You are the agent of AHP session {session.uri}, run by an AHP host.",
                        *snapshot.instructions, *tool_hints(session, snapshot),
                        *([definition.instructions] if definition is not None and definition.instructions else [])])
