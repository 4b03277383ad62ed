"""createTerminal and disposeTerminal, and what the connection does once a terminal action is
applied (the PTY is written to, resized)."""
from typing import TYPE_CHECKING

from kernel.orm import database_sync_to_async
from sandbox.bubblewrap import SandboxUnavailable
from sessions_app.channels import parse, session_at
from tools_app.families.terminals import actions, pty
from tools_app.families.terminals.models import Terminal

from . import errors
from .errors import Params

if TYPE_CHECKING:
    from .homes import Asker, Handler


def size(params: Params, name: str, default: int) -> int:
    value = params.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise errors.RpcError(errors.INVALID_PARAMS, f"Invalid params: {name} must be a number.")
    return value


async def create_terminal(consumer: "Asker", params: Params) -> None:
    uri = errors.require(params, "channel", str)
    kind, terminal_id = parse(uri)
    if kind != "terminal":
        raise errors.RpcError(errors.INVALID_PARAMS, "Invalid params: channel must be ahp-terminal:/<uuid>.")
    claim = params.get("claim")
    session_uri = params.get("session") or (claim.get("session") if isinstance(claim, dict) else None)
    if not isinstance(session_uri, str):
        raise errors.RpcError(errors.INVALID_PARAMS,
                              "Invalid params: createTerminal needs the session it opens in (session, or a session claim).")
    title = params.get("name", "")
    if not isinstance(title, str):
        raise errors.RpcError(errors.INVALID_PARAMS, "Invalid params: name must be a string.")
    cols, rows = size(params, "cols", 80), size(params, "rows", 24)

    def create() -> Terminal:
        session = session_at(session_uri, consumer.tenant)
        if session is None or not consumer.principal.may("session:read", session):
            raise errors.RpcError(errors.NOT_FOUND, f"No session {session_uri} here.")
        return actions.do_create_terminal(consumer.principal, terminal_id, session, consumer.client_id,
                                          params.get("cwd"), title, cols, rows, claim)

    terminal = await database_sync_to_async(create)()
    try:
        await pty.start(terminal)
    except SandboxUnavailable as unavailable:
        # No shell can run confined (no bubblewrap): the terminal goes with its sentence, so no
        # terminal is left that lists as running and never answers.
        await database_sync_to_async(actions.do_dispose_terminal)(consumer.principal, terminal)
        raise errors.RpcError(errors.INTERNAL_ERROR, str(unavailable)) from None
    return None


async def dispose_terminal(consumer: "Asker", params: Params) -> None:
    uri = errors.require(params, "channel", str)

    def dispose() -> None:
        terminal = actions.terminal_at(uri, consumer.tenant)
        if terminal is None or not consumer.principal.may("terminal:read", terminal.session):
            raise errors.RpcError(errors.NOT_FOUND, f"No terminal {uri} here.")
        actions.do_dispose_terminal(consumer.principal, terminal)  # its shell ends where it runs

    await database_sync_to_async(dispose)()


def type_into(consumer: "Asker", outcome: tuple[Terminal, str]) -> None:
    terminal, data = outcome
    running = pty.running(terminal.id)
    if running is not None:
        running.write(data)


def resize(consumer: "Asker", outcome: tuple[Terminal, tuple[int, int]]) -> None:
    terminal, (cols, rows) = outcome
    running = pty.running(terminal.id)
    if running is not None:
        running.resize(cols, rows)


# Both run at the home of the terminal's session (homes.SESSION_OF), where its shell runs.
COMMANDS: dict[str, "Handler"] = {"createTerminal": create_terminal, "disposeTerminal": dispose_terminal}
