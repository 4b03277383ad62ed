"""One Claude Code CLI in its session's sandbox, kept warm across a chat's turns.

The Claude Agent SDK's client keeps the CLI running on streaming input: each turn's query goes to
the same process, which holds the conversation in memory. Its callbacks (the host's two tool
servers, the permission asker, the sub-agent hook) are bound when it starts, so they reach the
turn it answers now through `CurrentClaudeTurn`.

What the CLI is started with is fixed for its life: its command line (tools, disallowed and
allowed tools, the sub-agent's definition, the system prompt with the catalog's and the agent
definition's instructions, the model, its own MCP servers), the tool lists it read from the host's
servers at start, and its sandbox (folders, destinations, the model's stand-in). A turn whose
catalog, agent definition, connection or folders differ in any of these restarts the CLI (it
resumes the conversation from its transcript) rather than patching it: most of them cannot change
in a running CLI, and one rule keeps what the model is offered exactly the chat's snapshot.
"""
import logging
import shutil
from collections import deque
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any, AsyncIterator

from claude_agent_sdk import ClaudeAgentOptions, ClaudeSDKClient, HookContext, HookInput, PermissionResultDeny
from claude_agent_sdk._internal.transport.subprocess_cli import SubprocessCLITransport
from claude_agent_sdk.types import SyncHookJSONOutput

from sandbox.bubblewrap import PRIVATE, Sandbox

from ..warm import NO_TURN, CurrentTurn, launch_digest, sandbox_fields

logger = logging.getLogger(__name__)

STDERR_LINES = 20
MCP_CONFIG = "mcp-config.json"  # the CLI's MCP servers, in its launch's private folder


async def no_prompt() -> AsyncIterator[dict[str, Any]]:
    return
    yield


class SandboxedCli(SubprocessCLITransport):
    """The SDK's transport, with the CLI's command line wrapped in the session's sandbox."""

    def __init__(self, options: ClaudeAgentOptions, sandbox: Sandbox, environment: dict[str, str]) -> None:
        # Its command line is built from these options: the CLI asks its permissions over the
        # control protocol, as the SDK's own transport would be told for a can_use_tool.
        super().__init__(prompt=no_prompt(), options=replace(options, permission_prompt_tool_name="stdio"))
        self.sandbox, self.environment = sandbox, environment
        self.private: Path | None = None  # this launch's own folder, holding the CLI's MCP servers

    def _build_command(self) -> list[str]:
        command = super()._build_command()
        if "--mcp-config" in command:
            # Its servers' headers are a tenant's secrets: a file of this launch's alone, not the
            # command line nor the session's home, which the session's terminals share.
            at = command.index("--mcp-config") + 1
            self.private = self.sandbox.private_folder({MCP_CONFIG: command[at]})
            command[at] = f"{PRIVATE}/{MCP_CONFIG}"
        return self.sandbox.argv(command, env=self.environment, private=self.private)

    async def close(self) -> None:
        await super().close()
        if self.private:
            shutil.rmtree(self.private, ignore_errors=True)

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def running(self) -> bool:
        return self._process is not None and self._process.returncode is None


class CurrentClaudeTurn(CurrentTurn):
    """CurrentTurn with the sub-agent hook."""

    def __init__(self) -> None:
        super().__init__(PermissionResultDeny(message=NO_TURN))

    async def start(self, hook_input: HookInput, tool_use_id: str | None, context: HookContext) -> SyncHookJSONOutput:
        if self.agents is None:
            return {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                                           "permissionDecisionReason": NO_TURN}}
        return await self.agents.start(hook_input, tool_use_id, context)


def launch_key(options: ClaudeAgentOptions, tool_lists: dict, sandbox: Sandbox, environment: dict) -> str:
    """A digest of everything the CLI is started with (not the conversation it resumes): two turns
    with the same key can share one process."""
    configured = options.mcp_servers if isinstance(options.mcp_servers, dict) else {}
    servers = {name: entry for name, entry in configured.items() if entry.get("type") != "sdk"}
    agents = {name: asdict(agent) for name, agent in (options.agents or {}).items()}
    return launch_digest(options.cli_path, options.tools, options.disallowed_tools, options.allowed_tools, servers,
                         tool_lists, agents, options.system_prompt, options.model, sandbox_fields(sandbox), environment)


class ClaudeProcess:
    """A running CLI: its SDK client, its sandboxed transport, the turn it answers, its last words."""

    def __init__(self, client: ClaudeSDKClient, transport: SandboxedCli, current: CurrentTurn,
                 stderr: deque) -> None:
        self.client, self.transport, self.current, self.stderr = client, transport, current, stderr
        self.conversation: str | None = None  # the one the chat's next cold start resumes, once a turn kept it

    @classmethod
    async def start(cls, options: ClaudeAgentOptions, sandbox: Sandbox, environment: dict[str, str],
                    current: CurrentTurn, stderr: deque) -> "ClaudeProcess":
        """A CLI started with `options`; its last lines of stderr go to `stderr`."""
        options.stderr = stderr.append
        transport = SandboxedCli(options, sandbox, environment)
        client = ClaudeSDKClient(options, transport=transport)
        await client.connect()  # a failed start closes what it started
        return cls(client, transport, current, stderr)

    @property
    def pid(self) -> int | None:
        return self.transport.pid

    def alive(self) -> bool:
        return self.transport.running()

    async def stop(self) -> None:
        """The CLI ends (and the sandbox's launch with it: bubblewrap's namespace dies with its process)."""
        try:
            await self.client.disconnect()
        except Exception:  # it is going away either way; a failed close is no turn's failure
            logger.warning("Closing a claude harness failed", exc_info=True)

