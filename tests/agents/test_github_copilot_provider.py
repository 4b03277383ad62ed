"""The provider against a stand-in Copilot runtime: a TCP JSON-RPC peer the SDK reaches through
its URI runtime connection, so no Copilot CLI is needed and the SDK's real create_session and
resume_session (with their own checks of the filter lists) do the talking."""
import asyncio
import json
import socketserver
import threading

import pytest
from copilot import RuntimeConnection

from agents.providers.github_copilot import EMPTY_MODE_NEEDS_STORAGE, GitHubCopilotProvider
from tools_app.definitions.agent_definitions import AgentDefinitionInvalid
from tools_app.models import AgentDefinition

BUILTIN = "github-cli-builtin-tools"


class FakeRuntime(socketserver.ThreadingTCPServer):
    """Answers the handshake and session calls, and keeps every request it was sent."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), _Peer)
        self.requests = []

    def calls(self, method):
        return [params for name, params in self.requests if name == method]


class _Peer(socketserver.StreamRequestHandler):
    def handle(self):
        while True:
            header = self.rfile.readline()
            if not header:
                return
            self.rfile.readline()
            message = json.loads(self.rfile.read(int(header.split(b":")[1])))
            if "id" not in message:
                continue
            self.server.requests.append((message["method"], message.get("params") or {}))
            self._reply(message["id"], self._result(message["method"], message.get("params") or {}))

    def _result(self, method, params):
        if method == "connect":
            return {"ok": True, "protocolVersion": 3, "version": "stand-in"}
        if method in ("session.create", "session.resume"):
            return {"sessionId": params["sessionId"]}
        return {"success": True}  # session.options.update, session.detach, ...

    def _reply(self, request_id, result):
        body = json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}).encode()
        self.wfile.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))


@pytest.fixture
def runtime():
    server = FakeRuntime()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def provider(runtime, tmp_path):
    port = runtime.server_address[1]
    return GitHubCopilotProvider(connection=RuntimeConnection.for_uri(f"127.0.0.1:{port}"), base_directory=str(tmp_path))


def agent(*tools, tenant_id=1, name="reviewer"):
    """An in-memory definition: the provider reads its fields, never the database."""
    return AgentDefinition(
        tenant_id=tenant_id, name=name, provider="github-copilot", model="gpt-5",
        instructions="Review, never edit.", tools=list(tools),
    )


def run(provider, *steps):
    async def go():
        try:
            return [await step for step in steps]
        finally:
            await provider.close()

    return asyncio.run(go())


def test_it_passes_the_same_lists_to_create_and_resume(provider, runtime):
    reviewer = agent({"kind": BUILTIN, "available-tools": {"isolated": True}, "excluded-tools": {"tools": ["task"]}})

    async def create_then_resume():
        session = await provider.create_session(reviewer)
        await provider.resume_session(reviewer, session.session_id)

    run(provider, create_then_resume())
    [created], [resumed] = runtime.calls("session.create"), runtime.calls("session.resume")
    expected = reviewer.builtin_tool_policy()
    for payload in (created, resumed):
        assert payload["availableTools"] == expected.available_tools
        assert payload["excludedTools"] == ["builtin:task"]
        assert payload["model"] == "gpt-5"
        assert payload["systemMessage"] == {"mode": "append", "content": "Review, never edit."}


def test_without_an_entry_the_sdk_fields_stay_unset(provider, runtime):
    run(provider, provider.create_session(agent({"kind": "web_request"})))
    [created] = runtime.calls("session.create")
    assert "availableTools" not in created and "excludedTools" not in created


def test_the_sole_wildcard_reaches_the_sdk_as_its_default(provider, runtime):
    run(provider, provider.create_session(agent({"kind": BUILTIN, "available-tools": {"tools": ["*"]},
                                                 "excluded-tools": {"tools": ["*"]}})))
    [created] = runtime.calls("session.create")
    assert "availableTools" not in created
    assert created["excludedTools"] == ["builtin:*"]


def test_an_empty_mode_agent_runs_on_an_empty_mode_client(provider, runtime):
    locked = agent({"kind": BUILTIN, "client-mode": "empty", "available-tools": {"tools": ["mcp:*"]}})
    run(provider, provider.create_session(locked))
    [created] = runtime.calls("session.create")
    assert created["availableTools"] == ["mcp:*"]
    # Only an empty-mode client strips installed plugins after creating a session.
    [patch] = runtime.calls("session.options.update")
    assert patch["installedPlugins"] == []


def test_a_copilot_cli_agent_gets_no_empty_mode_patch(provider, runtime):
    run(provider, provider.create_session(agent({"kind": BUILTIN, "available-tools": {"tools": ["mcp:*"]}})))
    assert runtime.calls("session.options.update") == []


def test_clients_are_pooled_by_mode_and_storage(provider):
    cli = agent({"kind": BUILTIN, "excluded-tools": {"tools": ["shell"]}})
    other_cli = agent(name="helper")
    empty = agent({"kind": BUILTIN, "client-mode": "empty", "available-tools": {"isolated": True}})
    other_tenant = agent(tenant_id=2)
    assert provider.client_for(cli) is provider.client_for(other_cli)
    assert provider.client_for(empty) is not provider.client_for(cli)
    assert provider.client_for(empty) is provider.client_for(empty)
    assert provider.client_for(other_tenant) is not provider.client_for(cli)
    assert provider.storage_for(other_tenant).endswith("tenant-2")
    run(provider)


def test_it_refuses_an_empty_mode_agent_without_storage(runtime):
    bare = GitHubCopilotProvider(connection=RuntimeConnection.for_uri(f"127.0.0.1:{runtime.server_address[1]}"))
    locked = agent({"kind": "web_request"}, {"kind": BUILTIN, "client-mode": "empty", "available-tools": {"tools": ["mcp:*"]}})
    with pytest.raises(AgentDefinitionInvalid) as caught:
        bare.client_for(locked)
    assert str(caught.value) == f"/tools/1/client-mode: {EMPTY_MODE_NEEDS_STORAGE}"
    assert EMPTY_MODE_NEEDS_STORAGE == (
        "client-mode empty needs storage of its own: configure a base directory or a session filesystem "
        "for the github-copilot provider."
    )
    # A copilot-cli agent may use the runtime's own storage.
    bare.client_for(agent({"kind": BUILTIN, "available-tools": {"tools": ["mcp:*"]}}))
    run(bare)


def test_it_refuses_an_empty_mode_agent_that_bypassed_the_schema(provider, runtime):
    # Not saved, so the schema never saw it; the provider still refuses before the SDK does.
    unsafe = agent({"kind": BUILTIN, "client-mode": "empty", "available-tools": {"tools": []}})
    with pytest.raises(AgentDefinitionInvalid) as caught:
        run(provider, provider.create_session(unsafe))
    assert "/tools/0/available-tools/tools: [] should be non-empty" == str(caught.value)
    assert runtime.calls("session.create") == []
