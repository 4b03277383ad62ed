"""A tools/call of the MCP endpoint runs at its session's home (sessions_app/actions/homes.py),
as the socket's requests do (ahp.protocol.homes): whatever the call touches of the session's
files and processes (its terminals, computers, MCP servers, sandbox) is the home's. Any other
process hands the call, with the endpoint it came through, to the home over the channel layer
and relays its result. A call is waited on while its home lives: the tool's own deadline bounds
it, not the socket's answer time."""
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from typing import Any

from ahp.protocol import homes
from kernel.orm import database_sync_to_async
from sessions_app.actions.homes import do_find_home, shared_layer
from sessions_app.actions.tool_calls import failure
from sessions_app.events import PROCESS

TOOL_CALL = "ahp.home_tool_call"


@dataclass(frozen=True)
class OpenEndpoint:
    session_id: uuid.UUID
    tenant_id: int
    person_id: int | None  # whom a person's token acts as; None for a root token or the host's agent
    for_agent: bool  # the host's agent: acts only within the turn it answers


Run = Callable[[OpenEndpoint, str, dict], Awaitable[dict]]


async def call_at_home(endpoint: OpenEndpoint, name: str, arguments: dict, run: Run) -> dict:
    """The call's AHP ToolCallResult, `run` at the home of the endpoint's session."""
    if not shared_layer():
        return await run(endpoint, name, arguments)
    while True:
        home = await database_sync_to_async(do_find_home)(str(endpoint.session_id))
        if home == PROCESS:
            return await run(endpoint, name, arguments)
        answer = await homes.ask_home(home, {"type": TOOL_CALL, "endpoint": {**asdict(endpoint), "session_id": str(
            endpoint.session_id)}, "name": name, "arguments": arguments}, None)
        if answer is None:
            continue  # the home died unanswered: the session is taken by a live process
        if "error" in answer:
            return failure(name, answer["error"]["message"])
        return answer["result"]


def answer_calls_with(run: Run) -> None:
    """This process, as a session's home, runs the calls other processes hand it with `run`."""

    async def answer(message: dict) -> Any:
        fields = message["endpoint"]
        endpoint = OpenEndpoint(**{**fields, "session_id": uuid.UUID(fields["session_id"])})
        return await run(endpoint, message["name"], message["arguments"])

    homes.ANSWERERS[TOOL_CALL] = answer
