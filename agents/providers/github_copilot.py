"""The `github-copilot` provider: the GitHub Copilot CLI, through its SDK, answers the turns;
and AgentDefinitions run on the same SDK.

A turn starts the Copilot CLI inside the session's sandbox (only the session's folders, no host
environment, only the model endpoint reachable), on a BYOK provider (an OpenAI-compatible, Azure
or Anthropic endpoint the operator configures), and resumes the chat's Copilot conversation,
which the CLI keeps in the sandbox's home. The chat's catalog snapshot at the turn's start is
handed over as SDK custom tools whose handlers call the toolbox: every call shows in the chat
with its catalog name and source, client tools go to their client while the CLI waits, and a
refused call goes back to the model as the refusal sentence. Without an agent definition,
`available_tools` names exactly those tools and the task tool, for the host's one sub-agent,
`worker` (Agents): it works in a chat of its own on the tool-origin catalog. The reply streams
into the chat as the model writes it, and a cancelled turn aborts the session's message.

For AgentDefinitions, the `github-cli-builtin-tools` entry becomes two things: the session's
`available_tools` / `excluded_tools` (passed identically to create and resume) and the client's
`mode`, which the SDK fixes when a client is constructed. Clients are therefore pooled by
(mode, storage): an empty-mode agent never shares a client with a copilot-cli one, and tenants
never share storage. A turn of an empty-mode agent runs its CLI in that mode, keeping its state
in its tenant's own base directory (beside the sandboxes' homes on the shared root, so every node
reads it), not in the session's sandbox home.
"""
import logging
import uuid
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from copilot import CopilotClient, CopilotClientMode, RuntimeConnection, SessionFsConfig
from copilot.generated.rpc import PermissionDecisionReject
from copilot.session import CopilotSession

from kernel.refusals import Refused
from sandbox.bubblewrap import Sandbox, session_sandbox
from sandbox.homes import tenant_harness_folder
from sandbox.proxy import PLACEHOLDER_KEY, StandIn

from ..conversations import do_keep_conversation, resumed_conversation
from ..harness import AgentConnection, RunningTurns, copilot_cli, copilot_package, host_connection, not_installed
from ..instructions import session_instructions
from ..model_check import model_problem
from ..warm import NO_TURN, WARM, CurrentTurn, Launch, launch_digest, sandbox_fields
from .copilot_turn import TASK_TOOL, Agents, Streamed, custom_tools, permission_handler

if TYPE_CHECKING:
    from tools_app.models import AgentDefinition
    from tools_app.runtime.toolbox import ChatToolbox

    from ..registry import AgentInfo, ModelInfo

logger = logging.getLogger(__name__)

PROVIDER_ID = "github-copilot"

NO_RUNTIME = not_installed("github-copilot", "the GitHub Copilot CLI (npm @github/copilot)", "COPILOT_CLI_PATH")
NO_MODEL = ("The github-copilot agent has no model endpoint: set agentConnections.github-copilot (baseUrl and "
            "apiKey, or githubToken) or AHP_COPILOT_BASE_URL.")
TURN_TIMEOUT_SECONDS = 600
SUBAGENT = "worker"
SUBAGENT_PROMPT = "You are a sub-agent in an AHP session: do the task you are given with your tools and answer what you found."
DEFAULT_MODEL = "gpt-4.1"
HANDLERS = ("tools", "on_permission_request")  # options bound to the turn the session answers now
# Where a CLI signed in with a GitHub token finds its models.
GITHUB_ENDPOINTS = (("api.github.com", 443), ("api.githubcopilot.com", 443), ("api.individual.githubcopilot.com", 443))

EMPTY_MODE_NEEDS_STORAGE = (
    "client-mode empty needs storage of its own: configure a base directory or a session filesystem "
    "for the github-copilot provider."
)


def model_stand_in(connection: AgentConnection) -> StandIn:
    """The BYOK endpoint as the proxy reaches it, adding the key the way its type expects."""
    key = connection.get("apiKey")
    if not key:
        return StandIn("model", connection["baseUrl"], ())
    header = ("api-key", key) if connection.get("type") == "azure" else ("Authorization", f"Bearer {key}")
    return StandIn("model", connection["baseUrl"], (header,))


def byok_provider(connection: AgentConnection, stand_in: StandIn) -> dict[str, str]:
    """The provider the CLI is given: the stand-in's address and a placeholder key; the proxy adds the real one."""
    provider = {"type": connection.get("type") or "openai", "base_url": stand_in.inside(connection["baseUrl"]),
                "wire_api": connection.get("wireApi") or "completions"}
    if connection.get("apiKey"):
        provider["api_key"] = PLACEHOLDER_KEY
    return provider


class CopilotProcess:
    """A Copilot CLI server in its session's sandbox and the chat's session on it, kept across turns."""

    def __init__(self, client: CopilotClient, current: CurrentTurn, session: CopilotSession) -> None:
        self.client, self.current, self.session = client, current, session
        self.conversation_kept = False  # the chat's next cold start resumes this session

    @classmethod
    async def start(cls, cli: str, sandbox: Sandbox, environment: dict[str, str], connection: AgentConnection,
                    mode: CopilotClientMode, storage: str | None, current: CurrentTurn, conversation: str | None,
                    options: dict[str, Any]) -> "CopilotProcess":
        """The CLI, and on it the chat's session: `conversation` resumed, or a new one."""
        # The SDK appends its own flags to the command line: they reach the CLI inside the sandbox.
        argv = sandbox.argv([cli], env=environment)
        client = CopilotClient(connection=RuntimeConnection.for_stdio(path=argv[0], args=argv[1:]),
                               github_token=connection.get("githubToken") or None, mode=mode, base_directory=storage)
        try:
            session = await (client.resume_session(conversation, **options) if conversation
                             else client.create_session(**options))
        except BaseException:
            await client.stop()
            raise
        return cls(client, current, session)

    @property
    def pid(self) -> int | None:
        process = self.client._cli_process
        return process.pid if process is not None else None

    def alive(self) -> bool:
        process = self.client._cli_process
        return process is not None and process.poll() is None

    async def stop(self) -> None:
        try:
            await self.session.disconnect()
        except Exception:  # the CLI is stopped next either way
            logger.warning("Closing a Copilot session failed", exc_info=True)
        await self.client.stop()


class GitHubCopilotProvider:
    id = PROVIDER_ID
    display_name = "GitHub Copilot"
    description = "The GitHub Copilot CLI, through its SDK."
    models: tuple["ModelInfo", ...] = ({"id": "github-copilot", "provider": PROVIDER_ID, "name": "GitHub Copilot"},)

    def __init__(self, *, connection: RuntimeConnection | None = None, base_directory: str | None = None,
                 session_fs: SessionFsConfig | None = None, github_token: str | None = None) -> None:
        """`connection` is an SDK RuntimeConnection (None: the SDK's bundled CLI over stdio);
        `base_directory` holds one storage directory per tenant; `session_fs` is the SDK's
        connection-level session filesystem configuration."""
        self.connection = connection
        self.base_directory = base_directory
        self.session_fs = session_fs
        self.github_token = github_token
        self._clients: dict[tuple[CopilotClientMode, str | None], CopilotClient] = {}
        self.turns = RunningTurns[CopilotSession]()

    def agent_info(self) -> "AgentInfo":
        return {"provider": self.id, "displayName": self.display_name, "description": self.description,
                "models": list(self.models)}

    async def cancel(self, session_id: uuid.UUID) -> None:
        """The running turn was cancelled: the Copilot session aborts its message (its answer is
        dropped); the CLI and its session stay warm for the chat's next turn."""
        await self.turns.interrupt(session_id, CopilotSession.abort)

    def runtime_missing(self) -> str | None:
        """NO_RUNTIME while the Copilot CLI is not installed: no turn could start."""
        return None if copilot_cli() else NO_RUNTIME

    async def prepared(self, toolbox: "ChatToolbox") -> Launch[CopilotProcess]:
        """How the chat's CLI runs a turn now: its launch key, and how it starts (with the chat's
        session on it, created or resumed)."""
        cli = copilot_cli()
        if cli is None:
            raise Refused(NO_RUNTIME, "no_agent")
        # The tenant's endpoint (a BYOK baseUrl, or GitHub's models for a githubToken alone), or the
        # host's BYOK provider (with the host's key: only there).
        connection = await toolbox.agent_connection(self.id, host_connection(self.id))
        if problem := await model_problem(self.id, connection):
            raise Refused(problem, "no_agent")
        snapshot = await toolbox.snapshot()
        agents, current = Agents(toolbox, snapshot), CurrentTurn(PermissionDecisionReject(feedback=NO_TURN))
        tools = custom_tools(snapshot, current)
        stand_in = model_stand_in(connection) if connection.get("baseUrl") else None
        reached: tuple[tuple[str, int], ...] = ()
        environment: dict[str, str] = {}
        if stand_in is None:
            if not connection.get("githubToken"):
                raise Refused(NO_MODEL, "no_agent")
            reached, environment = GITHUB_ENDPOINTS, {"COPILOT_SDK_AUTH_TOKEN": connection["githubToken"]}
        if package := await copilot_package(cli):  # the node's, read-only: not unpacked into each home
            environment = {**environment, "COPILOT_PKG_CACHE_HOME": package}
        definition = await toolbox.agent_definition()
        mode: CopilotClientMode = definition.builtin_tool_policy().client_mode if definition else "copilot-cli"
        sandbox = replace(session_sandbox(toolbox.session, read_only=(package,) if package else (), destinations=reached),
                          stand_ins=(stand_in,) if stand_in else ())
        storage = self.tenant_storage(toolbox.session.tenant_id) if mode == "empty" else None
        if storage is not None:
            # An empty-mode client keeps its state in its tenant's base directory (the sandbox
            # clears the environment the SDK would set, so the CLI is told inside it).
            sandbox = replace(sandbox, host_writable=(storage,))
            environment = {**environment, "COPILOT_HOME": storage, "COPILOT_DISABLE_KEYTAR": "1"}
        # A definition's built-in tools policy decides, as for any of its sessions; without one, only the
        # host's tools and the task tool for the host's sub-agent.
        policy = self.session_options(definition) if definition else {
            "available_tools": [*(t.name for t in tools), TASK_TOOL]}
        held = set(snapshot.names)
        worker = {"name": SUBAGENT, "display_name": "Worker", "prompt": SUBAGENT_PROMPT,
                  "description": "Works on a task you hand it, with the session's tools, in a chat of its own.",
                  "tools": [name for name in await toolbox.tool_origin_names() if name in held]}
        options: dict[str, Any] = {"model": connection.get("model") or DEFAULT_MODEL, **policy, "tools": tools, "streaming": True,
                   "system_message": {"mode": "append",
                                      "content": session_instructions(toolbox.session, snapshot, definition)},
                   "custom_agents": [worker], "on_permission_request": current.ask,
                   "working_directory": sandbox.working_directory}
        if stand_in is not None:
            options["provider"] = byok_provider(connection, stand_in)

        async def start() -> CopilotProcess:
            return await CopilotProcess.start(cli, sandbox, environment, connection, mode, storage, current,
                                              await resumed_conversation(toolbox.chat.id, self.id), options)

        return Launch(launch_digest(cli, mode, storage, sandbox_fields(sandbox), environment,
                                    connection.get("githubToken"), snapshot.definitions,
                                    {k: v for k, v in options.items() if k not in HANDLERS}),
                      agents, permission_handler(toolbox, connection), start)

    async def prewarm(self, toolbox: "ChatToolbox") -> None:
        """The chat's CLI and session start before its first turn (its session was just made, and
        the caller holds the chat's WARM.prewarming); the turn goes to them when nothing they were
        started with changed meanwhile."""
        launch = await self.prepared(toolbox)
        await WARM.keep(self.id, toolbox.chat.id, toolbox.session.id, launch.key, await launch.start())

    async def run_turn(self, text: str, toolbox: "ChatToolbox") -> str:
        """The chat's warm CLI server and session answer when they were started as this turn needs;
        otherwise a new CLI starts, resuming the chat's conversation, and stays warm after a turn
        that ended cleanly. A changed catalog, definition, connection or folder restarts it: the
        session's tools, agents and provider are fixed when it is created or resumed."""
        launch = await self.prepared(toolbox)
        agents, chat_id, session_id = launch.agents, toolbox.chat.id, toolbox.session.id
        process, clean, answer, listening = None, False, None, []
        try:
            process = await WARM.take(self.id, chat_id, launch.key, CopilotProcess) or await launch.start()
            process.current.begin(agents, launch.asks)
            streamed = Streamed(toolbox)
            listening = [process.session.on(streamed.take), process.session.on(agents.take)]
            try:
                async with self.turns.running(session_id, process.session):
                    answer = await process.session.send_and_wait(text, timeout=TURN_TIMEOUT_SECONDS)
                    # Kept once it holds a message: the CLI has nothing to resume before.
                    if not process.conversation_kept:
                        await do_keep_conversation(chat_id, self.id, process.session.session_id)
                        process.conversation_kept = True
            except RuntimeError:
                # An aborted message ends as an error: the turn is already over, cancelled.
                if session_id not in self.turns.interrupted:
                    raise
            finally:
                await streamed.finish()
            clean = True
        finally:
            for unsubscribe in listening:
                unsubscribe()
            await agents.stop()
            if process is not None:
                process.current.end()
                # A turn that ended otherwise may have left the CLI mid-answer: it stops.
                await (WARM.keep(self.id, chat_id, session_id, launch.key, process) if clean else process.stop())
        return streamed.text or getattr(getattr(answer, "data", None), "content", "") or ""

    def storage_for(self, definition: "AgentDefinition") -> str | None:
        if self.base_directory is None:
            return None
        return str(Path(self.base_directory) / f"tenant-{definition.tenant_id}")

    def tenant_storage(self, tenant_id: int) -> str:
        """The tenant's own base directory for empty-mode clients (beside the homes unless configured)."""
        if self.base_directory is None:
            return tenant_harness_folder("copilot", tenant_id)
        folder = Path(self.base_directory) / f"tenant-{tenant_id}"
        folder.mkdir(parents=True, exist_ok=True)
        return str(folder)

    def client_for(self, definition: "AgentDefinition") -> CopilotClient:
        """The pooled client this definition's sessions run on, made on first use."""
        policy = definition.builtin_tool_policy()
        storage = self.storage_for(definition)
        if policy.client_mode == "empty" and storage is None and self.session_fs is None:
            # The SDK would accept a URI connection alone; the host will not let an
            # empty-mode agent fall back to a storage it shares with anyone else.
            raise definition.builtin_tools_invalid("client-mode", EMPTY_MODE_NEEDS_STORAGE)
        key = (policy.client_mode, storage)
        if key not in self._clients:
            self._clients[key] = CopilotClient(
                connection=self.connection, base_directory=storage, session_fs=self.session_fs,
                github_token=self.github_token, mode=policy.client_mode,
            )
        return self._clients[key]

    def offered_builtins(self, definition: "AgentDefinition | None") -> tuple[list[str] | None, list[str]]:
        """The CLI's own built-ins the model receives (None: all the CLI has) and those excluded:
        without a definition only the task tool of the host's sub-agent, as run_turn asks."""
        if definition is None:
            return [TASK_TOOL], []
        policy = definition.builtin_tool_policy()

        def bare(names: list[str]) -> list[str]:
            return [n.removeprefix("builtin:") for n in names if ":" not in n or n.startswith("builtin:")]
        return (None if policy.available_tools is None else bare(policy.available_tools)), bare(policy.excluded_tools or [])

    def session_options(self, definition: "AgentDefinition") -> dict[str, Any]:
        """What create_session and resume_session both get from the definition."""
        policy = definition.builtin_tool_policy()
        options = {"available_tools": policy.available_tools, "excluded_tools": policy.excluded_tools}
        if definition.model:
            options["model"] = definition.model
        if definition.instructions:  # a turn's own system message (session_instructions) carries them too
            options["system_message"] = {"mode": "append", "content": definition.instructions}
        return options

    async def create_session(self, definition: "AgentDefinition", **options: Any) -> CopilotSession:
        client = self.client_for(definition)
        return await client.create_session(**{**self.session_options(definition), **options})

    async def resume_session(self, definition: "AgentDefinition", session_id: str, **options: Any) -> CopilotSession:
        client = self.client_for(definition)
        return await client.resume_session(session_id, **{**self.session_options(definition), **options})

    async def close(self) -> None:
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            await client.stop()
