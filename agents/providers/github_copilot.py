"""The `github-copilot` provider: runs an AgentDefinition on the GitHub Copilot SDK.

The definition's `github-cli-builtin-tools` entry becomes two things here: the session's
`available_tools` / `excluded_tools` (passed identically to create and resume) and the
client's `mode`, which the SDK fixes when a client is constructed. Clients are therefore
pooled by (mode, storage): an empty-mode agent never shares a client with a copilot-cli one,
and tenants never share storage.

As an agent of its own (a session on `github-copilot`), a turn runs on the SDK's runtime with
none of the CLI's built-in tools, so nothing runs on the host outside a sandbox. Where that
runtime is missing, the turn fails with NO_RUNTIME.
"""
import os
from pathlib import Path

from copilot import CopilotClient
from copilot._cli_download import get_cached_cli_path

from kernel.refusals import Refused

PROVIDER_ID = "github-copilot"

NO_RUNTIME = (
    "The github-copilot agent cannot run on this host: the GitHub Copilot CLI is not installed. "
    "Set COPILOT_CLI_PATH to its executable, or give the provider a runtime connection."
)

EMPTY_MODE_NEEDS_STORAGE = (
    "client-mode empty needs storage of its own: configure a base directory or a session filesystem "
    "for the github-copilot provider."
)


class GitHubCopilotProvider:
    id = PROVIDER_ID
    display_name = "GitHub Copilot"
    description = "The GitHub Copilot CLI, through its SDK."
    models = ({"id": "github-copilot", "provider": PROVIDER_ID, "name": "GitHub Copilot"},)

    def __init__(self, *, connection=None, base_directory=None, session_fs=None, github_token=None):
        """`connection` is an SDK RuntimeConnection (None: the SDK's bundled CLI over stdio);
        `base_directory` holds one storage directory per tenant; `session_fs` is the SDK's
        connection-level session filesystem configuration."""
        self.connection = connection
        self.base_directory = base_directory
        self.session_fs = session_fs
        self.github_token = github_token
        self._clients = {}

    def agent_info(self):
        return {"provider": self.id, "displayName": self.display_name, "description": self.description,
                "models": list(self.models)}

    def runtime_missing(self):
        """NO_RUNTIME when neither a connection, COPILOT_CLI_PATH nor the SDK's own bundle is there."""
        if self.connection is not None:
            return None
        configured = os.environ.get("COPILOT_CLI_PATH")
        if configured:
            return None if os.access(configured, os.X_OK) else NO_RUNTIME
        # The SDK would download its bundle on first use; the host never fetches programs at a turn.
        return None if get_cached_cli_path() else NO_RUNTIME

    async def run_turn(self, text, toolbox):
        missing = self.runtime_missing()
        if missing:
            raise Refused(missing, "no_agent")
        key = ("agent", None)
        if key not in self._clients:
            self._clients[key] = CopilotClient(connection=self.connection, github_token=self.github_token)
        session = await self._clients[key].create_session(available_tools=[])
        try:
            answer = await session.send_and_wait(text)
        finally:
            await session.disconnect()
        return getattr(getattr(answer, "data", None), "content", "") or ""

    def storage_for(self, definition):
        if self.base_directory is None:
            return None
        return str(Path(self.base_directory) / f"tenant-{definition.tenant_id}")

    def client_for(self, definition):
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

    def session_options(self, definition):
        """What create_session and resume_session both get from the definition."""
        policy = definition.builtin_tool_policy()
        options = {"available_tools": policy.available_tools, "excluded_tools": policy.excluded_tools}
        if definition.model:
            options["model"] = definition.model
        if definition.instructions:
            options["system_message"] = {"mode": "append", "content": definition.instructions}
        return options

    async def create_session(self, definition, **options):
        client = self.client_for(definition)
        return await client.create_session(**self.session_options(definition), **options)

    async def resume_session(self, definition, session_id, **options):
        client = self.client_for(definition)
        return await client.resume_session(session_id, **self.session_options(definition), **options)

    async def close(self):
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            await client.stop()
