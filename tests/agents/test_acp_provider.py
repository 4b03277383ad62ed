"""The `acp` provider: an ACP agent subprocess answers turns and calls host tools through the
session's tools endpoint."""
import json
import os
import sys
import textwrap

import pytest

from sandbox import identity
from sessions_app.models import ToolCall, Turn
from agents.registry import PROVIDERS

from ..ahp.protocol.harness import AhpClient, default_chat, set_config
from ..ahp.mcp.helpers import tools_endpoint

# A small ACP agent: it reports what it was given, and for "/call <tool> <json>" calls that
# tool on the MCP server named "ahp" it was handed, through the official mcp client.
AGENT = textwrap.dedent('''
    import asyncio, json, os
    import acp, httpx
    from acp import schema
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client


    class Agent:
        def on_connect(self, conn):
            self.conn = conn
            self.servers = {}
            self.prompts = 0

        async def initialize(self, protocol_version, client_capabilities=None, client_info=None, **kwargs):
            return schema.InitializeResponse(protocol_version=protocol_version)

        async def new_session(self, cwd, mcp_servers=None, **kwargs):
            self.servers = {s.name: s for s in mcp_servers or ()}
            return schema.NewSessionResponse(session_id="acp-1")

        async def call_host_tool(self, name, arguments):
            ahp = self.servers["ahp"]
            headers = {h.name: h.value for h in ahp.headers}
            async with httpx.AsyncClient(headers=headers) as http:
                async with streamable_http_client(ahp.url, http_client=http) as (read, write, _):
                    async with ClientSession(read, write) as session:
                        await session.initialize()
                        result = await session.call_tool(name, arguments)
                        return result.content[0].text

        async def prompt(self, prompt, session_id, **kwargs):
            self.prompts += 1
            texts = [block.text for block in prompt]
            report = {"prompt": self.prompts, "blocks": texts, "servers": sorted(self.servers),
                      "uid": os.getuid(), "env": sorted(os.environ)}
            command = texts[-1]
            if command.startswith("/call "):
                name, _, raw = command[len("/call "):].partition(" ")
                # Reported the way real agents report MCP calls; the host already records it.
                await self.conn.session_update(session_id, acp.start_tool_call("c1", f"mcp__ahp__{name}"))
                report["result"] = await self.call_host_tool(name, json.loads(raw))
                await self.conn.session_update(session_id, acp.update_tool_call("c1", status="completed"))
                # A tool of the agent's own, which the chat shows as one of its calls.
                await self.conn.session_update(session_id, acp.start_tool_call("c2", "think", raw_input={"about": name}))
                await self.conn.session_update(session_id, acp.update_tool_call(
                    "c2", status="completed", content=[acp.tool_content(acp.text_block("thought it over"))]))
            await self.conn.session_update(session_id, acp.update_agent_message_text(json.dumps(report)))
            return schema.PromptResponse(stop_reason="end_turn")


    asyncio.run(acp.run_agent(Agent()))
''')


@pytest.fixture
def acp_agent(tmp_path):
    script = tmp_path / "agent.py"
    script.write_text(AGENT)
    tmp_path.chmod(0o755)  # the sandbox's user reads the operator's agent
    provider = PROVIDERS["acp"]
    provider.command = [sys.executable, str(script)]
    provider.read_only_paths = [str(tmp_path), sys.prefix]
    yield provider
    provider.command, provider.read_only_paths = None, []


def test_an_acp_agent_calls_a_host_tool_through_the_endpoint(acme, host, host_tools, acp_agent, tmp_path):
    set_config(host.port, acme.tokens["root"], mcpServers={"extra": {"type": "http", "url": "http://127.0.0.1:9/mcp"}})
    with AhpClient(host.port, acme.tokens["member"]) as alice:
        session = alice.create_session(provider="acp")
        # Any HTTP request teaches the process its listener; the REST call is what an operator does.
        endpoint = tools_endpoint(host.port, acme.tokens["member"], session).json()
        chat = default_chat(alice, session)
        alice.subscribe(chat)

        first = json.loads(alice.reply_to(alice.start_turn(chat, "hello"), timeout=60))
        assert first["prompt"] == 1 and first["blocks"][-1] == "hello" and len(first["blocks"]) == 2
        assert first["blocks"][0].startswith(f"You are the agent of AHP session {session}")
        assert first["servers"] == ["ahp", "extra"]
        if os.geteuid() == 0:  # the agent runs in the session's sandbox, as its unprivileged user
            assert first["uid"] == identity.existing_sandbox_user(session.rsplit("/", 1)[-1])
        assert not {"DATABASE_URL", "SECRET_KEY", "REDIS_URL"} & set(first["env"])

        turn = alice.start_turn(chat, '/call add {"a": 20, "b": 22}')
        start = alice.action("chat/toolCallStart", turnId=turn)["action"]
        assert start["toolName"] == "add"
        second = json.loads(alice.reply_to(turn, timeout=60))
        assert second["prompt"] == 2 and second["blocks"] == ['/call add {"a": 20, "b": 22}']
        assert second["result"] == "42"
        calls = list(ToolCall.objects.filter(turn_id=turn).order_by("created"))
        assert [(c.tool_name, c.status) for c in calls] == [("add", "completed"), ("think", "completed")]
        assert calls[1].result["content"] == [{"type": "text", "text": "thought it over"}]
        assert Turn.objects.filter(chat__session_id=session.split("/")[-1]).count() == 2
        assert endpoint["url"].endswith(session.split("/")[-1])
        alice.call("disposeSession", {"channel": session})


def test_without_an_agent_command_the_turn_fails_with_the_reason(acme, host):
    with AhpClient(host.port, acme.tokens["member"]) as alice:
        session = alice.create_session(provider="acp")
        chat = default_chat(alice, session)
        alice.subscribe(chat)
        turn = alice.start_turn(chat, "hello")
        error = alice.action("chat/error", turnId=turn, timeout=30)["action"]["error"]
        assert error["message"] == "Refused: The acp provider has no agent to run: set AHP_ACP_AGENT_COMMAND."
