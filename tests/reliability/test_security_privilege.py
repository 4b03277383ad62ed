"""No privilege escalation through tools: a session tool acting for a guest only reads, and a
turn a tool begins carries the person who began it, never more."""
import asyncio
import uuid

import pytest
from rest_framework.test import APIClient

from kernel import orm
from sessions_app.actions import do_create_session
from sessions_app.models import Session, Turn
from tools_app.catalog.host_tools import REGISTRY
from tools_app.families.session import SESSION_TOOLS
from tools_app.runtime.toolbox import ChatToolbox

WRITE_ARGUMENTS = {
    "send_message": lambda s: {"session": s.uri, "message": "hi"},
    "create_session": lambda s: {"relationship": "independent", "prompt": "go", "title": "t", "workspace": "/tmp"},
    "create_chat": lambda s: {"title": "t"},
    "rename_chat": lambda s: {"title": "t"},
    "archive_chat": lambda s: {"session": s.uri},
    "set_workspace": lambda s: {"workspaceFolder": "/tmp", "isolation": False},
    "delete_session": lambda s: {"session": s.uri},
    "move_session": lambda s: {"session": s.uri, "independent": True},
}
READ_ARGUMENTS = {
    "list_sessions": lambda s: {}, "list_agents": lambda s: {}, "list_models": lambda s: {},
    "get_current_session": lambda s: {}, "get_session_context": lambda s: {"session": s.uri},
}


def guest_turn(people):
    """A turn the guest is behind (a guest cannot start one; a grant taken back mid-turn can leave one)."""
    session = do_create_session(people.principal("member"), uuid.uuid4())
    target = do_create_session(people.principal("member"), uuid.uuid4())
    turn = Turn.objects.create(chat=session.chats.get(is_default=True), sender=people.guest, text="go")
    return Turn.objects.select_related("chat__session__tenant", "sender").get(pk=turn.pk), target


def run(turn, name, arguments):
    toolbox = ChatToolbox(turn)
    result = asyncio.run(toolbox.execute(asyncio.run(toolbox.snapshot()), name, arguments))
    # A turn the call started (create_session's prompt) is cancelled as its loop closes, but its
    # database work already running finishes on its ORM thread: waited for here, as the test
    # database's flush after the test deadlocked with it on a loaded machine.
    orm.close_connections()
    return result


def test_every_session_tool_covered():
    assert {t.name for t in SESSION_TOOLS} - {"isolate_session"} == set(WRITE_ARGUMENTS) | set(READ_ARGUMENTS)


@pytest.mark.parametrize("name", sorted(WRITE_ARGUMENTS))
def test_a_session_tool_acting_for_a_guest_may_not_write(acme, transactional_db, name):
    turn, target = guest_turn(acme)
    sessions_before = Session.objects.count()
    result = run(turn, name, WRITE_ARGUMENTS[name](target))
    assert result["success"] is False
    assert result["error"]["message"].startswith("acme-guest may not "), result
    assert Session.objects.count() == sessions_before
    target.refresh_from_db()
    assert (target.title, target.archived) == ("", False)


@pytest.mark.parametrize("name", sorted(READ_ARGUMENTS))
def test_a_session_tool_acting_for_a_guest_may_read(acme, transactional_db, name):
    turn, target = guest_turn(acme)
    result = run(turn, name, READ_ARGUMENTS[name](target))
    assert result["success"] is True, result


def test_the_host_tools_that_write_refuse_a_guest_too(acme, transactional_db):
    """Every host tool that does not say it only reads: run for a guest, it changes nothing."""
    turn, target = guest_turn(acme)
    writers = [t for t in REGISTRY.tools if t.source == "host" and t.group != "session"
               and not (t.annotations or {}).get("readOnlyHint")]
    assert writers
    for tool in writers:
        result = run(turn, tool.effective_name, {})
        assert result["success"] is False, (tool.effective_name, result)


def test_the_sessionless_door_lets_a_guest_only_read(acme, transactional_db):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {acme.tokens['guest']}")
    target = do_create_session(acme.principal("member"), uuid.uuid4())
    for name, arguments in WRITE_ARGUMENTS.items():
        tool = next(t for t in REGISTRY.tools if t.effective_name == name)
        if not tool.sessionless:
            continue
        response = client.post(f"/api/v1/tools/{name}", arguments(target), format="json")
        assert (response.status_code, response.json()) == (403, {"error": "acme-guest may not session:write here"})
    assert client.post("/api/v1/tools/list_sessions", {}, format="json").status_code == 200


def test_a_turn_a_tool_begins_carries_the_person_who_began_it(acme, transactional_db, workspace):
    session = do_create_session(acme.principal("member"), uuid.uuid4())
    target = do_create_session(acme.principal("admin"), uuid.uuid4())
    turn = Turn.objects.select_related("chat__session__tenant", "sender").get(pk=Turn.objects.create(
        chat=session.chats.get(is_default=True), sender=acme.member, text="go").pk)
    assert run(turn, "send_message", {"session": target.uri, "message": "from the member"})["success"] is True
    sent = Turn.objects.filter(chat__session=target, text="from the member").get()
    assert sent.sender == acme.member
    created = run(turn, "create_session", {"relationship": "independent", "prompt": "child work", "title": "child",
                                           "workspace": str(workspace)})
    assert created["success"] is True, created
    child = Session.objects.get(parent=session)
    assert child.owner == acme.member
    assert Turn.objects.get(chat__session=child, text="child work").sender == acme.member


def test_a_turn_nobody_is_behind_only_reads(acme, transactional_db):
    session = do_create_session(acme.principal("member"), uuid.uuid4())
    turn = Turn.objects.select_related("chat__session__tenant", "sender").get(pk=Turn.objects.create(
        chat=session.chats.get(is_default=True), sender=None, text="go").pk)
    assert run(turn, "list_sessions", {})["success"] is True
    refused = run(turn, "rename_chat", {"title": "t"})
    assert refused["error"]["message"].startswith("this turn may not "), refused
