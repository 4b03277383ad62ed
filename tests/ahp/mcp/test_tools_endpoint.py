"""The per-session MCP tools endpoint, driven by the official `mcp` client over a real socket."""
import asyncio
import threading
import time
import uuid

import httpx
import pytest
from mcp.shared.exceptions import McpError

from ahp.mcp import endpoint
from ahp.mcp.endpoint import NO_ENDPOINT, WRONG_TOKEN
from sessions_app.models import Chat, Session, ToolCall, Turn
from tools_app.catalog.loader import catalog_for_chat

from ...ahp.protocol.harness import AhpClient, default_chat
from .helpers import tools_endpoint, wait_until, with_mcp

IDE_TOOL = {"name": "open_file", "description": "Open a file in the editor",
            "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}}}


def open_session(host, people):
    """Alice's session and its endpoint's url and token."""
    alice = AhpClient(host.port, people.tokens["member"], "alice")
    session = alice.create_session()
    answer = tools_endpoint(host.port, people.tokens["member"], session).json()
    return alice, session, answer["url"], answer["token"]


def call(url, token, name, arguments):
    return with_mcp(url, token, lambda s: s.call_tool(name, arguments))


def raw_post(url, token, payload, version="2025-06-18"):
    headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": version}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return httpx.post(url, json=payload, headers=headers)


def test_it_lists_exactly_what_the_default_chat_is_offered(acme, host, host_tools):
    alice, session, url, token = open_session(host, acme)
    with alice, AhpClient(host.port, acme.tokens["member"], "ide") as ide:
        before = with_mcp(url, token, lambda s: s.list_tools())
        announce_ide_tool(ide, session)
        listed = with_mcp(url, token, lambda s: s.list_tools())
        # The list the endpoint made of the earlier snapshot is not offered again.
        assert "ide__open_file" not in {t.name for t in before.tools}
        chat = Chat.objects.get(session_id=session.split("/")[-1], is_default=True)
        offered = catalog_for_chat(chat).definitions
        assert [t.name for t in listed.tools] == [d["name"] for d in offered]
        assert {"add", "explode", "whoami", "ide__open_file"} <= {t.name for t in listed.tools}
        add = next(t for t in listed.tools if t.name == "add")
        assert add.inputSchema == host_tools[0].input_schema and add.description == "Add two numbers"


def test_it_runs_a_host_tool_in_a_turn_the_host_begins_and_shows_it_in_the_chat(acme, host, host_tools):
    alice, session, url, token = open_session(host, acme)
    with alice:
        chat = default_chat(alice, session)
        alice.subscribe(chat)
        result = call(url, token, "add", {"a": 2, "b": 3})
        assert result.isError is False and result.content[0].text == "5"
        started = alice.action("chat/turnStarted")["action"]
        start = alice.action("chat/toolCallStart", turnId=started["turnId"])["action"]
        assert start["toolName"] == "add"
        done = alice.action("chat/toolCallComplete", toolCallId=start["toolCallId"])["action"]
        assert done["result"]["success"] is True
        alice.action("chat/turnComplete", turnId=started["turnId"])
        turn = Turn.objects.get(id=started["turnId"])
        assert (turn.client_id, turn.state, turn.sender.username) == ("ahp-mcp", "complete", "acme-member")


def announce_ide_tool(ide, session):
    """The IDE client joins the session offering IDE_TOOL, which it runs itself."""
    ide.subscribe(session)
    ide.dispatch(session, {"type": "session/activeClientSet", "activeClient": {"clientId": "ide", "tools": [IDE_TOOL]}})
    ide.action("session/activeClientSet")


def test_calls_in_a_row_share_one_turn_that_ends_once_the_agent_is_quiet(acme, host, host_tools):
    alice, session, url, token = open_session(host, acme)
    with alice:
        chat = default_chat(alice, session)
        alice.subscribe(chat)

        async def three_calls(mcp):
            return [(await mcp.call_tool("add", {"a": 1, "b": b})).content[0].text for b in range(3)]

        assert with_mcp(url, token, three_calls) == ["1", "2", "3"]
        started = alice.action("chat/turnStarted")["action"]
        alice.action("chat/turnComplete", turnId=started["turnId"])
        assert [str(c.turn_id) for c in ToolCall.objects.filter(tool_name="add")] == [started["turnId"]] * 3
        assert Turn.objects.filter(chat__session_id=session.split("/")[-1]).count() == 1


def test_a_persons_message_ends_the_attached_agents_quiet_turn_at_once(acme, host, host_tools, monkeypatch):
    monkeypatch.setattr(endpoint, "QUIET_TURN_SECONDS", 600)  # left to itself, the turn would run on
    alice, session, url, token = open_session(host, acme)
    with alice:
        chat = default_chat(alice, session)
        alice.subscribe(chat)

        async def one_call(mcp):
            return (await mcp.call_tool("add", {"a": 1, "b": 1})).content[0].text

        assert with_mcp(url, token, one_call) == "2"
        agents_turn = alice.action("chat/turnStarted")["action"]["turnId"]
        mine = str(uuid.uuid4())
        alice.dispatch(chat, {"type": "chat/turnStarted", "turnId": mine, "message": {"text": "my turn now"}})
        alice.action("chat/turnComplete", turnId=agents_turn)
        alice.action("chat/turnStarted", turnId=mine)


def test_a_call_still_open_keeps_the_attached_agents_turn_running(acme, host, host_tools, monkeypatch):
    monkeypatch.setattr(endpoint, "QUIET_TURN_SECONDS", 0.1)
    alice, session, url, token = open_session(host, acme)
    with alice, AhpClient(host.port, acme.tokens["member"], "ide") as ide:
        chat = default_chat(alice, session)
        announce_ide_tool(ide, session)
        outcome, ide_asked = {}, threading.Event()

        async def open_then_add(mcp):
            opening = asyncio.ensure_future(mcp.call_tool("ide__open_file", {"path": "README.md"}))
            await asyncio.to_thread(ide_asked.wait, 20)  # the add call comes while the IDE's is open
            await mcp.call_tool("add", {"a": 1, "b": 1})
            outcome["opened"] = await opening

        caller = threading.Thread(target=lambda: with_mcp(url, token, open_then_add))
        caller.start()
        request = ide.action("session/inputNeededSet")["action"]["request"]
        ide_asked.set()
        wait_until(lambda: ToolCall.objects.filter(tool_name="add", completed__isnull=False).exists(),
                   describe="the add call completing while the IDE's is open")
        time.sleep(1)  # many quiet periods pass while the IDE's call is open
        assert Turn.objects.get(id=request["turnId"]).state == "active"
        ide.dispatch(chat, {"type": "chat/toolCallComplete", "turnId": request["turnId"],
                            "toolCallId": request["toolCall"]["toolCallId"],
                            "result": {"success": True, "pastTenseMessage": "Opened the file",
                                       "content": [{"type": "text", "text": "opened"}]}})
        caller.join(20)
        assert outcome["opened"].content[0].text == "opened"
        assert {str(c.turn_id) for c in ToolCall.objects.filter(turn__chat_id=chat.split("/")[-1])} == {request["turnId"]}
        wait_until(lambda: Turn.objects.get(id=request["turnId"]).state == "complete", describe="the quiet turn ending")


def test_it_joins_the_turn_the_default_chat_is_running(acme, host, host_tools):
    alice, session, url, token = open_session(host, acme)
    with alice:
        chat = default_chat(alice, session)
        alice.subscribe(chat)
        with AhpClient(host.port, acme.tokens["member"], "ide") as ide:
            ide.subscribe(session)
            ide.dispatch(session, {"type": "session/activeClientSet",
                                   "activeClient": {"clientId": "ide", "tools": [IDE_TOOL]}})
            ide.action("session/activeClientSet")
            # The echo agent waits on the IDE's tool, so the turn stays active meanwhile.
            running = alice.start_turn(chat, '/call ide__open_file {"path": "README.md"}')
            ide.action("session/inputNeededSet")
            result = call(url, token, "whoami", {})
            assert result.content[0].text == f"acme-member in turn {running}"
            assert ToolCall.objects.filter(turn_id=running, tool_name="whoami").count() == 1
            assert Turn.objects.filter(chat__session_id=session.split("/")[-1]).count() == 1


def test_it_routes_a_client_tool_call_to_that_client(acme, host):
    alice, session, url, token = open_session(host, acme)
    with alice, AhpClient(host.port, acme.tokens["member"], "ide") as ide:
        chat = default_chat(alice, session)
        announce_ide_tool(ide, session)

        outcome = {}
        caller = threading.Thread(target=lambda: outcome.update(
            result=call(url, token, "ide__open_file", {"path": "README.md"})))
        caller.start()
        request = ide.action("session/inputNeededSet")["action"]["request"]
        assert (request["kind"], request["clientId"], request["chat"]) == ("toolClientExecution", "ide", chat)
        ide.dispatch(chat, {"type": "chat/toolCallComplete", "turnId": request["turnId"],
                            "toolCallId": request["toolCall"]["toolCallId"],
                            "result": {"success": True, "pastTenseMessage": "Opened the file",
                                       "content": [{"type": "text", "text": "opened"}]}})
        caller.join(20)
        assert outcome["result"].isError is False and outcome["result"].content[0].text == "opened"


def test_a_tool_that_raises_answers_is_error_with_its_message(acme, host, host_tools):
    alice, session, url, token = open_session(host, acme)
    with alice:
        result = call(url, token, "explode", {})
        assert result.isError is True
        assert result.content[0].text == "explode raised ValueError: the fuse was lit"


def test_a_refused_call_answers_the_sentence_the_model_sees(acme, host, host_tools):
    alice, session, url, token = open_session(host, acme)
    with alice:
        missing = call(url, token, "nope", {})
        assert missing.isError is True and missing.content[0].text == 'No tool named "nope" is available in this chat.'
        bad = call(url, token, "add", {"a": "two", "b": 3})
        assert bad.isError is True and bad.content[0].text == "Invalid input for add at /a: 'two' is not of type 'number'"


def test_a_missing_token_gets_401_and_another_sessions_token_404(acme, host, host_tools):
    alice, session, url, token = open_session(host, acme)
    with alice:
        other = alice.create_session()
        other_token = tools_endpoint(host.port, acme.tokens["member"], other).json()["token"]
        ping = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        response = raw_post(url, None, ping)
        assert response.status_code == 401
        assert response.json()["error"]["message"] == WRONG_TOKEN
        # A wrong token is told what it would be told where there is no endpoint at all.
        for wrong in (other_token, acme.tokens["member"], token + "x"):
            response = raw_post(url, wrong, ping)
            assert response.status_code == 404
            assert response.json()["error"]["message"] == NO_ENDPOINT
        with pytest.raises(McpError):  # the SDK's client reads a 404 as its session ended
            with_mcp(url, other_token, lambda s: s.list_tools())


def test_an_unknown_or_closed_endpoint_gets_404(acme, host, host_tools):
    alice, session, url, token = open_session(host, acme)
    with alice:
        base = url.rsplit("/", 1)[0]
        listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        assert raw_post(f"{base}/{uuid.uuid4()}", token, listing).status_code == 404
        assert raw_post(f"{base}/not-a-uuid", token, listing).status_code == 404
        assert raw_post(url, token, listing).status_code == 200
        alice.call("disposeSession", {"channel": session})
        assert not Session.objects.filter(id=session.split("/")[-1]).exists()
        assert raw_post(url, token, listing).status_code == 404


def test_other_methods_get_minus_32601(acme, host):
    alice, session, url, token = open_session(host, acme)
    with alice:
        for method in ("resources/list", "prompts/list", "sampling/createMessage", "made/up"):
            response = raw_post(url, token, {"jsonrpc": "2.0", "id": 7, "method": method, "params": {}})
            assert response.json()["error"]["code"] == -32601, method

        async def list_resources(session):
            return await session.list_resources()

        with pytest.raises(McpError) as refused:
            with_mcp(url, token, list_resources)
        assert refused.value.error.code == -32601


def test_it_speaks_protocol_revision_2025_06_18(acme, host):
    alice, session, url, token = open_session(host, acme)
    with alice:
        response = raw_post(url, token, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
        assert response.status_code == 200 and response.headers["content-type"].startswith("application/json")
        result = response.json()["result"]
        assert result["protocolVersion"] == "2025-06-18" and "tools" in result["capabilities"]


def test_host_tools_the_caller_may_not_see_stay_hidden_and_unknown(acme, host, host_tools):
    """The endpoint is the chat's catalog: a tool left out of it is refused, not run."""
    alice, session, url, token = open_session(host, acme)
    with alice:
        names = {t.name for t in with_mcp(url, token, lambda s: s.list_tools()).tools}
        assert "ide__open_file" not in names
        refused = call(url, token, "ide__open_file", {"path": "x"})
        assert refused.isError is True
        assert refused.content[0].text == 'No tool named "ide__open_file" is available in this chat.'
        wait_until(lambda: not Turn.objects.filter(chat__session_id=session.split("/")[-1], state="active").exists(),
                   describe="the host-begun turn ending")
