"""The session tools through the echo agent over a real socket: `/call <tool> <json>` in a
turn, the reply text is the tool's result text."""
import json
import subprocess

from agents.registry import PROVIDERS
from tests.ahp.protocol.harness import AhpClient, default_chat
from tests.conftest import tenant_made

from .conftest import FolderPerChatEcho, sessionless


def call(client, chat, tool, arguments):
    return client.reply_to(client.start_turn(chat, f"/call {tool} {json.dumps(arguments)}"))


def test_an_agent_creates_a_session_whose_first_turn_runs(acme, host):
    with AhpClient(host.port, acme.tokens["member"], "alice") as alice:
        session = alice.create_session()
        chat = default_chat(alice, session)
        alice.subscribe(chat)
        made = json.loads(call(alice, chat, "create_session",
                               {"relationship": "independent", "prompt": "hello child", "title": "Child"}))
        child_chat = default_chat(alice, made["session"])
        state = alice.subscribe(child_chat)
        turns = state["turns"] + ([state["activeTurn"]] if "activeTurn" in state else [])
        assert turns[0]["message"]["text"] == "hello child"
        listed = json.loads(call(alice, chat, "list_sessions", {}))["sessions"]
        assert {r["session"] for r in listed} == {session, made["session"]}
        context = json.loads(call(alice, chat, "get_session_context", {"session": made["session"]}))
        assert context["turns"][-1]["assistant"] == "hello child" or context["activeTurn"]["message"] == "hello child"


def test_send_message_reaches_another_chat_and_refusals_read_as_sentences(acme, host):
    with AhpClient(host.port, acme.tokens["member"], "alice") as alice:
        target = alice.create_session()
        target_chat = default_chat(alice, target)
        alice.subscribe(target_chat)
        session = alice.create_session()
        chat = default_chat(alice, session)
        alice.subscribe(chat)
        sent = json.loads(call(alice, chat, "send_message", {"session": target, "message": "ping"}))
        assert sent["delivery"] == "started"
        assert alice.reply_to(sent["turnId"]) == "ping"
        assert call(alice, chat, "send_message", {"session": session, "message": "me"}) == (
            "send_message cannot message the chat it runs in.")


def test_a_turn_nobody_is_behind_reads_but_is_refused_writes(acme, host):
    """The root token sends a message with no person behind it: the turn it starts may read
    and is refused every write."""
    with AhpClient(host.port, acme.tokens["member"], "alice") as alice:
        session = alice.create_session()
        chat = default_chat(alice, session)
        alice.subscribe(chat)
        text = '/call create_chat {"title": "t"}\n/call get_current_session {}'
        sent = sessionless("send_message", acme.principal("root"), session=session, message=text)
        refusal, current = alice.reply_to(sent["turnId"]).split("\n", 1)
        assert refusal == "this turn may not session:write here"
        assert json.loads(current)["session"] == session


def test_set_workspace_and_isolate_session_land_when_the_turn_completes(acme, host, workspace):
    folder = workspace / "repo"
    folder.mkdir()
    for command in (["init", "-q"], ["-c", "user.email=t@e", "-c", "user.name=T", "commit", "-q", "--allow-empty",
                                     "-m", "start"]):
        subprocess.run(["git", "-C", str(folder), *command], check=True)
    tenant_made(folder, acme.tenant)
    PROVIDERS[FolderPerChatEcho.id] = FolderPerChatEcho()
    try:
        with AhpClient(host.port, acme.tokens["member"], "alice") as alice:
            session = alice.create_session(provider=FolderPerChatEcho.id)
            chat = default_chat(alice, session)
            alice.subscribe(chat)
            call(alice, chat, "set_workspace", {"workspaceFolder": str(folder), "isolation": False})
            assert alice.action("session/workingDirectorySet")["action"]["directory"] == f"file://{folder}"
            assert "isolate_session" in alice.reply_to(alice.start_turn(chat, "/tools")).split("\n")
            reply = call(alice, chat, "isolate_session", {})
            assert reply.startswith("End this turn")
            moved = alice.action("chat/workingDirectorySet")["action"]["directory"]
            assert moved.startswith(f"file://{folder}.worktrees/")
    finally:
        PROVIDERS.pop(FolderPerChatEcho.id, None)
