"""A session's first turn, started the moment createSession answers (as every client does), runs
on its finished catalog: its agent definition and its MCP servers' tools, and a sentence in the
turn for a server that did not answer in time."""
import socket
import time

import pytest

from tools_app.models import AgentDefinition

from ....ahp.protocol.harness import AhpClient, default_chat, set_config

OPEN_FILE = {"name": "open_file", "description": "Open a file in the editor",
             "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}}}
MUTE_UNAVAILABLE = ('MCP server "mute" is unavailable: it did not answer within 5 seconds, '
                    "so this turn runs without its tools.")


@pytest.fixture
def mute_server(allow_loopback):
    """An http MCP server that takes connections and never answers one."""
    listener = socket.create_server(("127.0.0.1", 0))
    yield {"type": "http", "url": f"http://127.0.0.1:{listener.getsockname()[1]}/mcp"}
    listener.close()  # the connections waiting on it fail now, not at their own timeouts


def first_turn(client, text, **session):
    """Create a session and start its first turn at once; the turn's id and its chat."""
    uri = client.create_session(**session)
    chat = default_chat(client, uri)
    client.subscribe(chat)
    return client.start_turn(chat, text), chat


def notifications(client, turn):
    """The system notifications the host put in `turn`, in order."""
    return [f["params"]["action"]["part"]["content"] for f in client.notifications
            if f.get("method") == "action" and f["params"]["action"].get("type") == "chat/responsePart"
            and f["params"]["action"]["turnId"] == turn
            and f["params"]["action"]["part"]["kind"] == "systemNotification"]


def test_the_first_turn_is_offered_exactly_the_one_tool_its_agent_definition_allows(acme, host, tiny_http_server):
    set_config(host.port, acme.tokens["root"], mcpServers={"web": tiny_http_server})
    AgentDefinition.objects.create(tenant=acme.tenant, name="whisperer", provider="echo", tools=[
        {"kind": "mcp", "serverName": "web", "allowedTools": ["whisper"]}])
    with AhpClient(host.port, acme.tokens["member"], "ide") as ide:
        turn, _ = first_turn(ide, "/tools", config={"agentDefinition": "whisperer"},
                             activeClient={"clientId": "ide", "tools": [OPEN_FILE]})
        assert ide.reply_to(turn).split("\n") == ["web_whisper"]
        assert notifications(ide, turn) == []


def test_the_first_turn_calls_a_tenant_http_servers_tool(acme, host, tiny_http_server):
    set_config(host.port, acme.tokens["root"], mcpServers={"web": tiny_http_server})
    with AhpClient(host.port, acme.tokens["member"]) as alice:
        turn, _ = first_turn(alice, '/call web_whisper {"text": "QUIET"}')
        assert alice.reply_to(turn, timeout=30) == "quiet"
        assert notifications(alice, turn) == []


def test_a_server_that_never_answers_is_reported_and_the_turn_runs_within_the_bound(acme, host, mute_server):
    set_config(host.port, acme.tokens["root"], mcpServers={"mute": mute_server})
    AgentDefinition.objects.create(tenant=acme.tenant, name="mute-only", provider="echo", tools=[
        {"kind": "mcp", "serverName": "mute"}])
    with AhpClient(host.port, acme.tokens["member"]) as alice:
        started = time.monotonic()
        turn, chat = first_turn(alice, "/tools", config={"agentDefinition": "mute-only"})
        # The definition's only tools are missing: the agent is offered nothing, never everything.
        assert alice.reply_to(turn) == ""
        assert time.monotonic() - started < 5 + 5  # the bound, and slack for a busy machine
        assert notifications(alice, turn) == [MUTE_UNAVAILABLE]
        # The chat's state keeps the sentence for a client that subscribes later.
        parts = alice.subscribe(chat)["turns"][-1]["responseParts"]
        assert {"kind": "systemNotification", "content": MUTE_UNAVAILABLE} in parts
