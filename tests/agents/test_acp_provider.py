"""The `acp` provider: an ACP agent subprocess answers turns and calls host tools through the
session's tools endpoint."""
import json
import os
import sys
import textwrap

import pytest

from agents.registry import PROVIDERS
from agents.warm import WARM
from sandbox import identity
from sandbox.bubblewrap import bubblewrap
from sessions_app.models import ToolCall, Turn

from ..ahp.mcp.helpers import tools_endpoint
from ..ahp.protocol.harness import AhpClient, default_chat, set_config
from .test_claude_provider import harness_pids
from .test_warm_harnesses import chat_id, wait_for

# A small ACP agent: it reports what it was given (and its pid and ACP session), for "/call <tool>
# <json>" calls that tool on the MCP server named "ahp" it was handed, through the official mcp
# client, for "/wait" reports a tool call and waits for the prompt's session/cancel, and for
# "/exit" exits once it answered (an agent that takes one prompt per process).
AGENT = textwrap.dedent('''
    import asyncio, json, os
    import acp, httpx
    from acp import schema
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    PROCESS = os.urandom(8).hex()  # this process's own (its pid is its sandbox's: the same in each)


    class Agent:
        def on_connect(self, conn):
            self.conn = conn
            self.servers = {}
            self.prompts = 0
            self.sessions = 0
            self.cancelled = asyncio.Event()

        async def initialize(self, protocol_version, client_capabilities=None, client_info=None, **kwargs):
            return schema.InitializeResponse(protocol_version=protocol_version)

        async def new_session(self, cwd, mcp_servers=None, **kwargs):
            self.servers = {s.name: s for s in mcp_servers or ()}
            self.sessions += 1
            return schema.NewSessionResponse(session_id=f"acp-{self.sessions}")

        async def cancel(self, session_id, **kwargs):
            self.cancelled.set()

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
                      "uid": os.getuid(), "env": sorted(os.environ), "process": PROCESS, "session": session_id}
            command = texts[-1]
            if command == "/exit":
                asyncio.get_running_loop().call_later(0.2, os._exit, 0)
            if command == "/wait":
                self.cancelled.clear()
                await self.conn.session_update(session_id, acp.start_tool_call("w1", "wait"))
                await self.cancelled.wait()
                return schema.PromptResponse(stop_reason="cancelled")
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


def test_two_turns_of_a_chat_go_to_one_agent_process_and_acp_session(acme, host, acp_agent):
    with AhpClient(host.port, acme.tokens["member"]) as alice:
        session = alice.create_session(provider="acp")
        chat = default_chat(alice, session)
        alice.subscribe(chat)
        first = json.loads(alice.reply_to(alice.start_turn(chat, "remember 17"), timeout=60))
        assert ("acp", chat_id(chat)) in WARM.chats()
        pids = harness_pids(session, sys.executable)
        assert len(pids) == 1  # still running between the turns
        second = json.loads(alice.reply_to(alice.start_turn(chat, "what was it?"), timeout=60))
        assert (second["process"], second["session"]) == (first["process"], first["session"])
        assert harness_pids(session, sys.executable) == pids
        assert second["prompt"] == 2 and second["blocks"] == ["what was it?"]


def test_an_agent_that_exits_after_its_prompt_is_started_again_for_the_next_turn(acme, host, acp_agent):
    with AhpClient(host.port, acme.tokens["member"]) as alice:
        session = alice.create_session(provider="acp")
        chat = default_chat(alice, session)
        alice.subscribe(chat)
        first = json.loads(alice.reply_to(alice.start_turn(chat, "/exit"), timeout=60))
        assert wait_for(lambda: not harness_pids(session, bubblewrap()), 10)
        again = json.loads(alice.reply_to(alice.start_turn(chat, "hello"), timeout=60))
        assert again["process"] != first["process"] and again["prompt"] == 1 and len(again["blocks"]) == 2


def test_a_cancelled_prompt_keeps_the_agent_process_for_the_next_turn(acme, host, acp_agent):
    with AhpClient(host.port, acme.tokens["member"]) as alice:
        session = alice.create_session(provider="acp")
        chat = default_chat(alice, session)
        alice.subscribe(chat)
        first = json.loads(alice.reply_to(alice.start_turn(chat, "hello"), timeout=60))
        turn = alice.start_turn(chat, "/wait")
        alice.action("chat/toolCallStart", turnId=turn, timeout=60)
        alice.dispatch(chat, {"type": "chat/turnCancelled", "turnId": turn})
        alice.action("chat/turnCancelled", turnId=turn, timeout=30)
        # The agent ended its prompt as cancelled and is warm again, for this chat.
        assert wait_for(lambda: ("acp", chat_id(chat)) in WARM.chats(), 10)
        after = json.loads(alice.reply_to(alice.start_turn(chat, "again"), timeout=60))
        assert (after["process"], after["session"], after["prompt"]) == (first["process"], first["session"], 3)


def test_the_nodes_cap_stops_the_least_recently_used_agent_and_its_next_turn_starts_cold(
        acme, host, acp_agent, settings):
    settings.AHP_HARNESS_WARM_MAX = 2
    with AhpClient(host.port, acme.tokens["member"]) as alice:
        sessions = [alice.create_session(provider="acp") for _ in range(3)]
        chats = [default_chat(alice, session) for session in sessions]
        answers = []
        for chat in chats:
            alice.subscribe(chat)
            answers.append(json.loads(alice.reply_to(alice.start_turn(chat, "hello"), timeout=60)))
        assert WARM.chats() == [("acp", chat_id(chats[1])), ("acp", chat_id(chats[2]))]
        assert wait_for(lambda: not harness_pids(sessions[0], sys.executable), 10)
        assert [len(harness_pids(session, sys.executable)) for session in sessions] == [0, 1, 1]
        # A new process, a new ACP session, handed the host's instructions again.
        again = json.loads(alice.reply_to(alice.start_turn(chats[0], "and again"), timeout=60))
        assert again["process"] != answers[0]["process"] and again["prompt"] == 1 and len(again["blocks"]) == 2
        assert WARM.chats() == [("acp", chat_id(chats[2])), ("acp", chat_id(chats[0]))]
