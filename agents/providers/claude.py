"""The `claude` provider: Claude Code, through the Claude Agent SDK, answers the turns.

Each turn starts the Claude Code CLI inside the session's sandbox (only the session's folders,
no host environment, and only the model endpoint reachable) and resumes the chat's Claude
conversation, which the CLI keeps in the sandbox's home. The model is offered exactly the
chat's catalog snapshot at the turn's start, as two in-process SDK MCP servers: `host` (the
host's and plugins' tools, run by the host) and `client` (tools of
connected clients, named `<clientId>__<name>`, which their client runs while the harness
waits), so it sees `mcp__host__<name>` and `mcp__client__<clientId>__<name>`. Every call goes
through the toolbox: it shows in the chat with its catalog name and source, and a refused call
goes back to the model as the refusal sentence. The session's own MCP servers are the CLI's
(OwnServers): their tools the snapshot holds are offered as `mcp__<server>__<tool>`.

Of the CLI's own built-ins, the session's agent definition's built-in tools entry (the
specification's one policy shape, `github-cli-builtin-tools`) offers those its available-tools
name as Claude Code tool names (`Bash`, `Read`; `*` all), less those its excluded-tools name; none
without one. A built-in that needs a permission asks the person (an AHP tool confirmation),
unless the tenant's agentConnections.claude says `"permissions": "approve-all"`; a denial reaches
the model as a sentence. It runs in the CLI, inside the sandbox.

The CLI's Agent tool is always offered, for one sub-agent, `worker`: each
Agent call shows in the chat and opens a chat of its own (origin: that call), where the
sub-agent's calls show and are checked against the tool-origin catalog, which is also all its
definition lists (no userChats tools). The SDK's MCP servers serve every agent of the CLI, so a
call is attributed by its tool_use id: the CLI names it in the call's request, and the message
stream says which Agent call's sub-agent produced it.
"""
import logging
import uuid
import warnings
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from claude_agent_sdk import (
    AgentDefinition,
    AssistantMessage,
    CanUseToolShadowedWarning,
    ClaudeAgentOptions,
    ClaudeSDKClient,
    ClaudeSDKError,
    HookMatcher,
    McpSdkServerConfig,
    PermissionResult,
    PermissionResultAllow,
    PermissionResultDeny,
    ResultMessage,
    StreamEvent,
    TextBlock,
    ToolPermissionContext,
    UserMessage,
)
from claude_agent_sdk.types import McpHttpServerConfig, McpStdioServerConfig, ToolsPreset
from mcp import types
from mcp.server.lowlevel import Server

from kernel.refusals import Refused
from sandbox.bubblewrap import program_prefix, session_sandbox
from sandbox.outbound import CLIENT_DECLARED
from sandbox.proxy import PLACEHOLDER_KEY, StandIn
from tools_app.definitions.agent_definitions import is_builtin_tools, tool_entries

from ..conversations import do_keep_conversation, resumed_conversation
from ..harness import AgentConnection, RunningTurns, builtin_permission, claude_cli, host_connection, not_installed
from ..instructions import session_instructions
from ..model_check import model_problem
from ..warm import WARM, Launch
from .claude_agents import AGENT_TOOL, SUBAGENT, Agents
from .claude_process import STDERR_LINES, ClaudeProcess, CurrentClaudeTurn, launch_key

if TYPE_CHECKING:
    from tools_app.catalog.catalog import CatalogSnapshot
    from tools_app.catalog.registry import Tool
    from tools_app.models import AgentDefinition as Definition
    from tools_app.runtime.toolbox import ChatToolbox

    from ..registry import AgentInfo, ModelInfo

logger = logging.getLogger(__name__)
# The host's own servers are allowed whole on purpose: the host checks their calls, not the CLI.
warnings.filterwarnings("ignore", category=CanUseToolShadowedWarning)

PROVIDER_ID = "claude"
HOST_SERVER, CLIENT_SERVER = "host", "client"
NO_CLI = not_installed("claude", "the Claude Code CLI (npm @anthropic-ai/claude-code)", "AHP_CLAUDE_CLI_PATH")
# What the CLI needs besides its model connection; no telemetry, no update checks.
CLI_ENVIRONMENT = {"CLAUDE_CODE_ENTRYPOINT": "sdk-py", "CLAUDE_CODE_SDK_READS_SESSION_STATE": "1",
                   "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1",
                   # A sub-agent answers within its Agent call (not in the background), and only the host's runs.
                   "CLAUDE_CODE_DISABLE_BACKGROUND_TASKS": "1", "CLAUDE_CODE_DISABLE_EXPLORE_PLAN_AGENTS": "1",
                   # The session's servers' tools are in the first model request.
                   "MCP_CONNECTION_NONBLOCKING": "false"}
TOOL_USE_META = "claudecode/toolUseId"


class HarnessStopped(RuntimeError):
    """The harness process ended before the turn did."""


def stopped_sentence(error: Exception, stderr: list[str]) -> str:
    last = f" Its last words: {' | '.join(stderr)}" if stderr else ""
    return (f"The claude harness stopped before the turn ended ({error}); the next turn starts it again.{last}")


Answer = Callable[[str, dict, str | None], Awaitable[tuple[str, bool]]]  # a tool call's (text, failed)


def tool_server(name: str, definitions: list[dict], answer: Answer) -> McpSdkServerConfig:
    """An in-process MCP server offering `definitions`, each call answered by `answer(name,
    arguments, tool_use_id)`."""
    server = Server(name)
    tools = [types.Tool(name=d["name"], title=d.get("title"), description=d.get("description") or d["name"],
                        inputSchema=d.get("inputSchema") or {"type": "object"}) for d in definitions]

    @server.list_tools()
    async def list_tools() -> list[types.Tool]:
        return tools

    # The host checks inputs itself, so a bad one is refused with the host's sentence.
    @server.call_tool(validate_input=False)
    async def call_tool(tool_name: str, arguments: dict | None) -> types.CallToolResult:
        meta = server.request_context.meta
        tool_use_id = (meta.model_extra or {}).get(TOOL_USE_META) if meta is not None else None
        text, failed = await answer(tool_name, arguments or {}, tool_use_id)
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)], isError=failed)

    return {"type": "sdk", "name": name, "instance": server}


class Streamed:
    """The reply's text as the model streams it into the chat; the model's messages are parted
    by a blank line, as in the reply the turn ends with."""

    def __init__(self, toolbox: "ChatToolbox") -> None:
        self.toolbox, self.pieces, self.new_message = toolbox, list[str](), False

    @property
    def text(self) -> str:
        return "".join(self.pieces)

    async def take(self, event: dict[str, Any]) -> None:
        if event.get("type") == "message_start":
            self.new_message = bool(self.pieces)
            return
        delta = event.get("delta") or {}
        if event.get("type") != "content_block_delta" or delta.get("type") != "text_delta" or not delta.get("text"):
            return
        piece = ("\n\n" if self.new_message else "") + delta["text"]
        self.new_message = False
        self.pieces.append(piece)
        await self.toolbox.stream(piece)


class OwnServers:
    """The session's MCP servers, handed to the CLI as its own: it starts the stdio ones inside
    the sandbox (their programs are the operator's) and reaches the http ones through the
    sandbox's outbound rules. Of their tools, only those the chat's snapshot holds are offered;
    their calls show in the chat from the message stream."""

    def __init__(self, servers: dict[str, dict[str, Any]], working_directory: str, snapshot: "CatalogSnapshot",
                 listed: Iterable["Tool"]) -> None:
        self.config: dict[str, McpStdioServerConfig | McpHttpServerConfig] = {}  # server name -> the CLI's entry
        self.stand_ins: list[StandIn] = []  # one for each http server
        for name, entry in servers.items():
            if name in (HOST_SERVER, CLIENT_SERVER):
                logger.warning('Left out MCP server "%s": the name is one of the host\'s own servers.', name)
            elif entry["type"] == "stdio" and entry.get("cwd") not in (None, working_directory):
                logger.warning('Left out MCP server "%s": its cwd %s is not the session\'s folder %s.',
                               name, entry["cwd"], working_directory)
            elif entry["type"] == "stdio":
                self.config[name] = {"type": "stdio", "command": entry["command"],
                                     "args": list(entry.get("args") or ()), "env": dict(entry.get("env") or {})}
            else:
                # The CLI reaches it through a stand-in the proxy sends on with the server's headers:
                # the tenant's secrets in them never enter the sandbox.
                stand_in = StandIn(f"mcp-{len(self.stand_ins)}", entry["url"],
                                   tuple((entry.get("headers") or {}).items()), bool(entry.get(CLIENT_DECLARED)))
                self.stand_ins.append(stand_in)
                self.config[name] = {"type": "http", "url": stand_in.inside(entry["url"]), "headers": {}}
        self.held: dict[str, str] = {}  # the CLI's name -> the catalog's, of the tools the snapshot holds
        self.hidden: list[str] = []  # the CLI's names of the rest
        for tool in listed:
            if tool.namespace in self.config:
                cli_name = f"mcp__{tool.namespace}__{tool.name}"
                if tool.effective_name in snapshot.bindings:
                    self.held[cli_name] = tool.effective_name
                else:
                    self.hidden.append(cli_name)

    @property
    def programs(self) -> list[str]:
        """The folders the stdio servers' programs need inside the sandbox, as if the host started them."""
        return [prefix for entry in self.config.values() if entry["type"] == "stdio"
                and (prefix := program_prefix(entry["command"]))]

    def is_theirs(self, cli_name: str) -> bool:
        return any(cli_name.startswith(f"mcp__{name}__") for name in self.config)


def builtin_names(selector: dict | None) -> list[str]:
    """Claude Code's tool names a selector of the built-in tools entry names (bare or `builtin:`);
    `{isolated: true}` names Copilot's isolated set, none of Claude's."""
    names = (selector or {}).get("tools") or ()
    return [name.removeprefix("builtin:") for name in names if ":" not in name or name.startswith("builtin:")]


def builtin_tools(definition: "Definition | None") -> tuple[list[str] | ToolsPreset, list[str]]:
    """The CLI's `tools` and `disallowed_tools`: the built-ins the definition's policy offers
    (with the Agent tool the host's sub-agent needs) and those it excludes."""
    document = definition.validated_document() if definition else {}
    entry: dict[str, Any] = next((e for e in tool_entries(document) if is_builtin_tools(e)), {})
    available, excluded = builtin_names(entry.get("available-tools")), builtin_names(entry.get("excluded-tools"))
    tools: list[str] | ToolsPreset = {"type": "preset", "preset": "claude_code"} if "*" in available else [*available, AGENT_TOOL]
    return tools, excluded


def not_offered(name: str) -> str:
    return f"The host does not offer {name} in this chat."


def permission_asker(toolbox: "ChatToolbox", connection: AgentConnection, own: OwnServers
                     ) -> Callable[[str, dict[str, Any], ToolPermissionContext], Awaitable[PermissionResult]]:
    """The SDK's can_use_tool: a built-in the policy offers runs once the person (or the tenant)
    allows it; a tool of an own server the snapshot does not hold (one it listed later) never runs."""
    async def can_use_tool(name: str, arguments: dict[str, Any], context: ToolPermissionContext) -> PermissionResult:
        if name in (AGENT_TOOL, "Task"):  # the PreToolUse hook already decided
            return PermissionResultAllow()
        if own.is_theirs(name):
            return PermissionResultAllow() if name in own.held else PermissionResultDeny(message=not_offered(name))
        command = arguments.get("command") if name == "Bash" else None
        refusal = await builtin_permission(toolbox, connection, name, arguments, command)
        return PermissionResultAllow() if refusal is None else PermissionResultDeny(message=refusal)
    return can_use_tool


class ClaudeProvider:
    id = PROVIDER_ID
    display_name = "Claude"
    description = "Claude Code, through the Claude Agent SDK, on the session's tools."
    models: tuple["ModelInfo", ...] = ({"id": "claude", "provider": PROVIDER_ID, "name": "Claude Code"},)

    def __init__(self) -> None:
        self.turns = RunningTurns[ClaudeSDKClient]()

    async def cancel(self, session_id: uuid.UUID) -> None:
        """The running turn was cancelled: the CLI is interrupted and ends its turn (its answer is
        dropped); the process stays warm for the chat's next turn."""
        await self.turns.interrupt(session_id, ClaudeSDKClient.interrupt)

    def agent_info(self) -> "AgentInfo":
        return {"provider": self.id, "displayName": self.display_name, "description": self.description,
                "models": list(self.models)}

    def offered_builtins(self, definition: "Definition | None") -> tuple[list[str] | None, list[str]]:
        """The CLI's own built-ins the model receives (None: every one of the claude_code preset)
        and those excluded, as run_turn hands them to the CLI."""
        tools, excluded = builtin_tools(definition)
        return (None if isinstance(tools, dict) else list(tools)), list(excluded)

    def runtime_missing(self) -> str | None:
        """NO_CLI while Claude Code is not installed: no turn could start."""
        return None if claude_cli() else NO_CLI

    def options(self, cli: str, agents: Agents, current: CurrentClaudeTurn, subagent_names: list[str],
                connection: AgentConnection, definition: "Definition | None"
                ) -> tuple[ClaudeAgentOptions, dict[str, list[dict]]]:
        """The CLI's options, its callbacks reaching `current`, and the tool lists of the host's two servers."""
        snapshot, toolbox, own = agents.snapshot, agents.toolbox, agents.own
        run_by_cli = {catalog: cli_name for cli_name, catalog in own.held.items()}
        host: list[dict] = []
        client: list[dict] = []
        for tool in snapshot.definitions:
            if tool["name"] not in run_by_cli:
                (client if snapshot.bindings[tool["name"]].client_id else host).append(tool)

        def offered(name: str) -> str:
            return run_by_cli.get(name) or f"mcp__{CLIENT_SERVER if snapshot.bindings[name].client_id else HOST_SERVER}__{name}"

        instructions = session_instructions(toolbox.session, snapshot, definition)
        worker = AgentDefinition(
            description="Works on a task you hand it, with the session's tools, in a chat of its own; answers what it found.",
            prompt=f"You are a sub-agent in AHP session {toolbox.session.uri}: do the task you are given with your "
                   "tools and answer with what you found.",
            tools=[offered(name) for name in subagent_names if name in snapshot.bindings], background=False)
        tools, disallowed = builtin_tools(definition)
        return ClaudeAgentOptions(
            cli_path=cli, tools=tools, disallowed_tools=[*disallowed, *own.hidden], setting_sources=[],
            can_use_tool=current.ask,
            allowed_tools=[f"mcp__{HOST_SERVER}", f"mcp__{CLIENT_SERVER}", *own.held],
            mcp_servers={**own.config, HOST_SERVER: tool_server(HOST_SERVER, host, current.answer),
                         CLIENT_SERVER: tool_server(CLIENT_SERVER, client, current.answer)},
            agents={SUBAGENT: worker},
            hooks={"PreToolUse": [HookMatcher(matcher=f"{AGENT_TOOL}|Task", hooks=[current.start])]},
            system_prompt={"type": "preset", "preset": "claude_code", "append": instructions},
            model=(definition.model if definition else "") or connection.get("model") or None,
            include_partial_messages=True), {HOST_SERVER: host, CLIENT_SERVER: client}

    async def prepared(self, toolbox: "ChatToolbox") -> Launch[ClaudeProcess]:
        """How the chat's CLI runs a turn now: its launch key, and how it starts."""
        cli = claude_cli()
        if cli is None:
            raise Refused(NO_CLI, "no_agent")
        # The tenant's endpoint, or the host's (with the host's key: only there).
        connection = await toolbox.agent_connection(self.id, host_connection(self.id))
        if problem := await model_problem(self.id, connection):
            raise Refused(problem, "no_agent")
        snapshot = await toolbox.snapshot()
        servers, read_only = await toolbox.runnable_mcp_servers()
        # The model key is the proxy's to add: the CLI holds a placeholder (a Bash call prints no key).
        model = StandIn("model", connection["baseUrl"],
                        (("x-api-key", connection["apiKey"]),) if connection["apiKey"] else ())
        sandbox = session_sandbox(toolbox.session, read_only=read_only)
        own = OwnServers(servers, sandbox.working_directory, snapshot, await toolbox.listed_server_tools())
        sandbox = replace(sandbox, read_only=(*sandbox.read_only, *own.programs), stand_ins=(model, *own.stand_ins))
        agents, current = Agents(toolbox, snapshot, own), CurrentClaudeTurn()
        options, tool_lists = self.options(cli, agents, current, await toolbox.tool_origin_names(), connection,
                                           await toolbox.agent_definition())
        environment = {**CLI_ENVIRONMENT, "ANTHROPIC_BASE_URL": model.inside(connection["baseUrl"]),
                       "ANTHROPIC_API_KEY": PLACEHOLDER_KEY}
        stderr: deque[str] = deque(maxlen=STDERR_LINES)

        async def start() -> ClaudeProcess:
            options.resume = await resumed_conversation(toolbox.chat.id, self.id)
            return await ClaudeProcess.start(options, sandbox, environment, current, stderr)

        return Launch(launch_key(options, tool_lists, sandbox, environment), agents,
                      permission_asker(toolbox, connection, own), start, stderr)

    async def prewarm(self, toolbox: "ChatToolbox") -> None:
        """The chat's CLI starts before its first turn (its session was just made, and the caller
        holds the chat's WARM.prewarming); the turn goes to it when nothing it was started with
        changed meanwhile."""
        launch = await self.prepared(toolbox)
        try:
            process = await launch.start()
        except ClaudeSDKError as error:  # the first turn starts it and says why it cannot
            logger.warning("Pre-warming the claude harness of chat %s failed: %s", toolbox.chat.id, error)
            return
        await WARM.keep(self.id, toolbox.chat.id, toolbox.session.id, launch.key, process)

    async def run_turn(self, text: str, toolbox: "ChatToolbox") -> str:
        """The chat's warm CLI answers when it was started as this turn needs it; otherwise a new
        one starts, resuming the chat's conversation, and stays warm after a turn that ended cleanly."""
        launch = await self.prepared(toolbox)
        agents, chat_id, session_id = launch.agents, toolbox.chat.id, toolbox.session.id
        replies: list[str] = []
        streamed, process, clean = Streamed(toolbox), None, False
        try:
            process = await WARM.take(self.id, chat_id, launch.key, ClaudeProcess) or await launch.start()
            process.current.begin(agents, launch.asks)
            async with self.turns.running(session_id, process.client):
                await process.client.query(text)
                async for message in process.client.receive_response():
                    if isinstance(message, StreamEvent) and message.parent_tool_use_id is None:
                        await streamed.take(message.event)
                    elif isinstance(message, AssistantMessage):
                        await agents.note(message)
                        if message.parent_tool_use_id is None:
                            replies.extend(block.text for block in message.content if isinstance(block, TextBlock))
                    elif isinstance(message, UserMessage):
                        await agents.finish(message)
                    elif isinstance(message, ResultMessage):
                        # A warm CLI goes on in the conversation its first turn kept: no write per turn.
                        if message.session_id != process.conversation:
                            await do_keep_conversation(chat_id, self.id, message.session_id)
                            process.conversation = message.session_id
                        # An interrupted turn ends as an error: the turn is already over, cancelled.
                        if message.is_error and session_id not in self.turns.interrupted:
                            raise RuntimeError(message.result or f"The claude harness ended the turn: {message.subtype}.")
            clean = True
        except ClaudeSDKError as error:
            raise HarnessStopped(stopped_sentence(error, list(process.stderr if process else launch.stderr))) from error
        finally:
            await agents.stop()
            if process is not None:
                process.current.end()
                # A turn that ended otherwise may have left the CLI mid-answer: it stops.
                await (WARM.keep(self.id, chat_id, session_id, launch.key, process) if clean else process.stop())
        return streamed.text or "\n\n".join(reply for reply in replies if reply)
