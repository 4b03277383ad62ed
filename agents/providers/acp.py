"""The `acp` provider: an Agent Client Protocol agent, run as a subprocess, answers the turns.

A chat's agent process and its ACP session stay warm between the chat's turns (agents/warm.py):
the next turn's `session/prompt` goes to the same process and session, unless what the agent is
started with (its command, sandbox, servers) changed; a cancelled turn sends `session/cancel` and
keeps the process. An agent that exits after a prompt is started again, cold, for the next turn.
On `session/new` the agent is handed the session's MCP tools endpoint (as the http server "ahp",
with its bearer token) and the session's mcpServers map; its first prompt opens with the host's
instructions as a text block of its own. What the agent streams back maps onto the chat: message
chunks become the turn's reply, and a tool call it reports becomes a chat tool call, except one it
made through the endpoint, which the endpoint has already recorded as the chat's own call.

The agent's command line is the operator's: `AHP_ACP_AGENT_COMMAND` (split like a shell), or
the `command` this provider was built with; the host folders it reads are
`AHP_ACP_AGENT_READ_ONLY_PATHS`. A client never chooses what the host runs, and the agent runs
in its session's sandbox, reaching only the host's tools endpoint and the session's http servers.
"""
import asyncio
import contextlib
import json
import logging
import os
import shlex
import uuid
from typing import TYPE_CHECKING, Any, Awaitable, Callable
from urllib.parse import urlparse

import acp
from acp import schema
from channels.db import database_sync_to_async

from grants.models import Principal
from kernel.refusals import Refused
from sandbox.bubblewrap import Sandbox, session_sandbox
from sandbox.outbound import CLIENT_DECLARED
from sessions_app import actions
from sessions_app.models import Session, Turn

from ..harness import RunningTurns, destination
from ..instructions import tool_hints
from ..warm import WARM, launch_digest, sandbox_fields

if TYPE_CHECKING:
    from sessions_app.tools_endpoint import ToolsEndpoint
    from tools_app.catalog.catalog import CatalogSnapshot
    from tools_app.runtime.toolbox import ChatToolbox

    from ..registry import AgentInfo, ModelInfo

logger = logging.getLogger(__name__)

ENDPOINT_SERVER_NAME = "ahp"
NO_COMMAND = "The acp provider has no agent to run: set AHP_ACP_AGENT_COMMAND."
# How an agent may name a tool it called on the endpoint server.
ENDPOINT_PREFIXES = (f"mcp__{ENDPOINT_SERVER_NAME}__", f"{ENDPOINT_SERVER_NAME}__", f"{ENDPOINT_SERVER_NAME}/",
                     f"{ENDPOINT_SERVER_NAME}.")


def no_such_agent(name: str) -> str:
    return f'The acp provider has no agent named "{name}": the operator defines them in AHP_ACP_AGENTS.'


def operator_agents() -> dict[str, list[str]]:
    """The operator's ACP agents by name: AHP_ACP_AGENTS, a JSON object of command lines (a
    string split like a shell, or a list). A tenant picks one by name and never names a command."""
    try:
        configured = json.loads(os.environ.get("AHP_ACP_AGENTS") or "{}")
    except ValueError:
        logger.warning("AHP_ACP_AGENTS is not JSON: no named ACP agent is offered.")
        return {}
    agents: dict[str, list[str]] = {}
    for name, command in configured.items() if isinstance(configured, dict) else ():
        line = shlex.split(command) if isinstance(command, str) else command
        if isinstance(line, list) and line and all(isinstance(part, str) for part in line):
            agents[name] = line
    return agents


def host_instructions(session: Session, snapshot: "CatalogSnapshot") -> str:
    lines = [
        f"You are the agent of AHP session {session.uri}, run by an AHP host.",
        f'The host\'s tools for this session are on the MCP server "{ENDPOINT_SERVER_NAME}"; '
        "call them there so every call shows in the session's chat.",
    ]
    lines.extend(snapshot.instructions)
    lines.extend(tool_hints(session, snapshot))
    return "\n\n".join(lines)


def acp_servers(endpoint_url: str, token: str, servers: dict[str, dict[str, Any]] | None
                ) -> list[schema.HttpMcpServer | schema.SseMcpServer | schema.AcpMcpServer | schema.McpServerStdio]:
    """The session's servers as ACP's session/new wants them, the endpoint first. A stdio
    entry is already the operator's runnable command (`runnable_stdio`): the agent starts it
    inside its own sandbox."""
    handed: list[schema.HttpMcpServer | schema.SseMcpServer | schema.AcpMcpServer | schema.McpServerStdio] = [schema.HttpMcpServer(type="http", name=ENDPOINT_SERVER_NAME, url=endpoint_url,
                                   headers=[schema.HttpHeader(name="Authorization", value=f"Bearer {token}")])]
    for name, entry in (servers or {}).items():
        if name == ENDPOINT_SERVER_NAME:
            logger.warning('Left out MCP server "%s": the name is the tools endpoint\'s.', name)
            continue
        if entry["type"] == "stdio":
            handed.append(schema.McpServerStdio(
                name=name, command=entry["command"], args=list(entry.get("args") or ()),
                env=[schema.EnvVariable(name=k, value=v) for k, v in (entry.get("env") or {}).items()]))
        else:
            handed.append(schema.HttpMcpServer(
                type="http", name=name, url=entry["url"],
                headers=[schema.HttpHeader(name=k, value=v) for k, v in (entry.get("headers") or {}).items()]))
    return handed


def agent_sandbox(session: Session, endpoint_url: str, servers: dict[str, dict[str, Any]], read_only: list[str]
                  ) -> Sandbox:
    """The agent's sandbox: its session's folders, the agent's and its servers' programs, and a
    way out to the host's tools endpoint (that path alone over plain HTTP) and the session's
    http servers only, a client's under the stricter rule for them."""
    reached = [(*destination(e["url"]), bool(e.get(CLIENT_DECLARED))) for e in servers.values() if e["type"] == "http"]
    endpoint = urlparse(endpoint_url)
    own = (*destination(endpoint_url), endpoint.path) if endpoint.scheme == "http" else destination(endpoint_url)
    return session_sandbox(session, read_only=read_only, destinations=reached, host_destinations=[own])


def text_of(content: object) -> str:
    return getattr(content, "text", "") if getattr(content, "type", "") == "text" else ""


class TurnMapper:
    """The ACP client side: what the agent reports during one prompt, onto the chat."""

    def __init__(self) -> None:
        self.turn: Turn | None = None
        self.endpoint_tools: frozenset[str] = frozenset()
        self.reply: list[str] = []
        self.calls: dict[str, uuid.UUID] = {}  # ACP toolCallId -> AHP tool call id
        # The ACP connection hands each notification to a task of its own: keep their order.
        self.ordered = asyncio.Lock()

    def start(self, turn: Turn, endpoint_tools: list[str]) -> None:
        self.turn, self.endpoint_tools, self.reply, self.calls = turn, frozenset(endpoint_tools), [], {}

    def through_endpoint(self, title: str | None) -> bool:
        name = title or ""
        for prefix in ENDPOINT_PREFIXES:
            if name.startswith(prefix):
                return True
        return name in self.endpoint_tools

    async def session_update(self, session_id: str, update: object, **kwargs: Any) -> None:
        async with self.ordered:
            await self.apply(update)

    async def apply(self, update: object) -> None:
        if isinstance(update, schema.AgentMessageChunk):
            self.reply.append(text_of(update.content))
        elif isinstance(update, schema.ToolCallStart):
            if self.turn is None or self.through_endpoint(update.title):
                return
            arguments = update.raw_input if isinstance(update.raw_input, dict) else {}
            try:
                call = await database_sync_to_async(actions.do_begin_tool_call)(
                    self.turn, update.title[:128], arguments, display_name=update.title[:200])
            except Refused:  # the turn ended: the agent's late call is not shown
                return
            self.calls[update.tool_call_id] = call.id
        elif isinstance(update, schema.ToolCallProgress):
            call_id = self.calls.get(update.tool_call_id)
            if call_id is None or update.status not in ("completed", "failed"):
                return
            texts = [text_of(getattr(c, "content", None)) for c in update.content or ()]
            text = "\n".join(t for t in texts if t) or (str(update.raw_output) if update.raw_output is not None else "")
            if update.status == "completed":
                result = {"success": True, "pastTenseMessage": "Ran the agent's tool",
                          "content": [{"type": "text", "text": text}]}
            else:
                result = actions.failure("tool", text or "The agent's tool failed.")
            await database_sync_to_async(actions.do_complete_tool_call)(call_id, result)

    async def request_permission(self, options: list[schema.PermissionOption], session_id: str,
                                 tool_call: schema.ToolCallUpdate, **kwargs: Any) -> schema.RequestPermissionResponse:
        # Every call this host makes is readied with confirmed 'not-needed': allow once.
        chosen = next((o for o in options if o.kind == "allow_once"), None) or next(
            (o for o in options if o.kind.startswith("allow")), None)
        if chosen is None:
            return schema.RequestPermissionResponse(outcome=schema.DeniedOutcome(outcome="cancelled"))
        return schema.RequestPermissionResponse(
            outcome=schema.AllowedOutcome(outcome="selected", option_id=chosen.option_id))


class AcpAgent:
    """A running ACP agent process and the ACP session it holds for a chat's conversation."""

    def __init__(self, stack: contextlib.AsyncExitStack, connection: Any, process: Any, acp_session_id: str,
                 mapper: TurnMapper) -> None:
        self.stack = stack
        self.connection = connection
        self.process = process
        self.acp_session_id = acp_session_id
        self.mapper = mapper
        self.prompted = False  # its first prompt opens with the host's instructions

    @property
    def pid(self) -> int | None:
        return self.process.pid

    def alive(self) -> bool:
        """An agent that exits after a prompt is started again, cold, for the next turn."""
        return self.process.returncode is None

    async def stop(self) -> None:
        with contextlib.suppress(Exception):  # it is going away either way
            await self.stack.aclose()


async def cancel_prompt(agent: AcpAgent) -> None:
    await agent.connection.cancel(session_id=agent.acp_session_id)


def agent_endpoint(session_id: uuid.UUID) -> tuple[Session, "ToolsEndpoint"]:
    session = Session.objects.select_related("tenant").get(id=session_id)
    return session, actions.do_open_tools_endpoint(Principal.root(session.tenant), session)


class AcpProvider:
    id = "acp"
    display_name = "ACP agent"
    description = "An Agent Client Protocol agent the host runs; it reaches the session's tools over MCP."
    models: tuple["ModelInfo", ...] = ({"id": "acp", "provider": "acp", "name": "ACP agent"},)

    def __init__(self, command: list[str] | None = None, read_only_paths: Any = ()) -> None:
        self.command = command
        self.read_only_paths = list(read_only_paths)
        self.turns = RunningTurns[AcpAgent]()

    def agent_info(self) -> "AgentInfo":
        return {"provider": self.id, "displayName": self.display_name, "description": self.description,
                "models": list(self.models)}

    def command_line(self, agent_name: str | None = None) -> list[str] | None:
        """The operator's agent named by the tenant's agentConnections.acp.agent, else the default one."""
        if agent_name:
            entry = operator_agents().get(agent_name)
            if entry is None:
                raise Refused(no_such_agent(agent_name), "no_agent")
            return entry
        if self.command:
            return list(self.command)
        configured = os.environ.get("AHP_ACP_AGENT_COMMAND", "")
        return shlex.split(configured) if configured.strip() else None

    def runtime_missing(self) -> str | None:
        """NO_COMMAND while the operator names no agent command: no turn could start."""
        return None if self.command_line() else NO_COMMAND

    def agent_read_only_paths(self) -> list[str]:
        """Host folders the agent's program needs (its script, a virtualenv): the operator's."""
        configured = os.environ.get("AHP_ACP_AGENT_READ_ONLY_PATHS", "")
        return [*self.read_only_paths, *(p for p in configured.split(os.pathsep) if p)]

    async def prepared(self, toolbox: "ChatToolbox") -> tuple[str, Callable[[], Awaitable[AcpAgent]]]:
        """How the chat's agent runs a turn now: its launch key (what it is started with: its command,
        sandbox and servers), and how it starts."""
        command = self.command_line((await toolbox.agent_connection(self.id, {})).get("agent"))
        if not command:
            raise Refused(NO_COMMAND, "no_agent")
        session, endpoint = await database_sync_to_async(agent_endpoint)(toolbox.session.id)
        endpoint_url, token = endpoint.url, endpoint.token
        servers, read_only = await toolbox.runnable_mcp_servers()
        sandbox = agent_sandbox(session, endpoint_url, servers, [*self.agent_read_only_paths(), *read_only])
        handed = acp_servers(endpoint_url, token, servers)

        async def start() -> AcpAgent:
            argv = sandbox.argv(command)
            mapper = TurnMapper()
            stack = contextlib.AsyncExitStack()
            try:
                # The sandbox clears the environment: the agent sees only what the sandbox sets.
                connection, process = await stack.enter_async_context(
                    # The connection answers what a client does not implement (files, terminals) as unknown.
                    acp.spawn_agent_process(mapper, argv[0], *argv[1:], env={}))  # type: ignore[arg-type]
                await connection.initialize(protocol_version=acp.PROTOCOL_VERSION,
                                            client_info=schema.Implementation(name="ahp-host", version="1"))
                created = await connection.new_session(cwd=sandbox.working_directory, mcp_servers=handed)
            except BaseException:
                await stack.aclose()
                raise
            return AcpAgent(stack, connection, process, created.session_id, mapper)

        key = launch_digest(command, sandbox_fields(sandbox), [server.model_dump() for server in handed])
        return key, start

    async def cancel(self, session_id: uuid.UUID) -> None:
        """The running turn was cancelled: ACP's session/cancel, after which the agent ends its
        prompt with stopReason `cancelled` (run_turn's answer is then dropped); the process stays
        warm for the chat's next turn."""
        await self.turns.interrupt(session_id, cancel_prompt)

    async def run_turn(self, text: str, toolbox: "ChatToolbox") -> str:
        """The chat's warm agent answers in its ACP session when it was started as this turn needs
        it; otherwise a new one starts, and stays warm after a prompt that ended cleanly."""
        key, start = await self.prepared(toolbox)
        chat_id, session_id = toolbox.chat.id, toolbox.session.id
        agent, clean = None, False
        try:
            agent = await WARM.take(self.id, chat_id, key, AcpAgent) or await start()
            snapshot = await toolbox.snapshot()
            prompt = []
            if not agent.prompted:
                prompt.append(acp.text_block(host_instructions(toolbox.session, snapshot)))
            prompt.append(acp.text_block(text))
            agent.mapper.start(toolbox.turn, snapshot.names)
            agent.prompted = True
            async with self.turns.running(session_id, agent):
                response = await agent.connection.prompt(session_id=agent.acp_session_id, prompt=prompt)
            reply = "".join(agent.mapper.reply)
            clean = True
        finally:
            if agent is not None:
                agent.mapper.turn = None
                # A prompt that ended otherwise may have left the agent mid-answer: it stops.
                await (WARM.keep(self.id, chat_id, session_id, key, agent) if clean else agent.stop())
        if response.stop_reason == "refusal":
            raise RuntimeError(reply or "The agent refused the prompt.")
        return reply
