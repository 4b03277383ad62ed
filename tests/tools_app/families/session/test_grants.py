"""Grants asked of the person behind the turn, and of a turn nobody is behind."""
import uuid

import pytest

from kernel.refusals import Refused
from sessions_app import actions
from sessions_app.models import Turn
from tools_app.runtime.toolbox import ChatToolbox

from .conftest import Place

WRITES = {
    "create_session": {"relationship": "independent", "prompt": "p", "title": "t"},
    "create_chat": {"title": "t"},
    "rename_chat": {"title": "t"},
    "send_message": {"session": None, "message": "m"},
    "set_workspace": {"workspaceFolder": "/tmp", "isolation": False},
    "move_session": {"session": None, "relationship": "independent"},
    "delete_session": {"session": None},
    "archive_chat": {"session": None},
}


def arguments(name, target):
    return {k: (target.session.uri if v is None else v) for k, v in WRITES[name].items()}


@pytest.mark.parametrize("name", sorted(WRITES))
def test_a_guest_writes_none_of_it(acme, place, name):
    target = Place(acme)
    with pytest.raises(Refused) as refused:
        place.call(name, principal=acme.principal("guest"), **arguments(name, target))
    assert refused.value.sentence == "acme-guest may not session:write here" or (
        name == "archive_chat" and refused.value.sentence == "acme-guest may not session:mark here")


@pytest.mark.parametrize("name", sorted(WRITES))
def test_a_turn_nobody_is_behind_is_refused_every_write(acme, place, name):
    target = Place(acme)
    hosts_turn = Turn.objects.create(chat=place.chat, text="begun by the host", sender=None)
    nobody = ChatToolbox(hosts_turn).principal()
    with pytest.raises(Refused) as refused:
        place.call(name, principal=nobody, **arguments(name, target))
    assert refused.value.sentence == "this turn may not session:write here"


def test_a_turn_nobody_is_behind_still_reads(acme, place):
    nobody = ChatToolbox(Turn.objects.create(chat=place.chat, text="x", sender=None)).principal()
    assert place.call("get_current_session", principal=nobody)["session"] == place.session.uri
    assert place.call("list_sessions", principal=nobody)["sessions"]


def test_the_grant_is_the_person_who_sent_the_turn(acme):
    """In a session an admin made, a guest's turn acts with the guest's grants."""
    place = Place(acme, role="admin")
    actions.do_end_turn(place.turn.id, response_text="ok")
    guest_turn = Turn.objects.create(chat=place.chat, text="x", sender=acme.guest)
    with pytest.raises(Refused) as refused:
        place.call("create_chat", principal=ChatToolbox(guest_turn).principal(), title="t")
    assert refused.value.sentence == "acme-guest may not session:write here"


def test_a_turn_begun_by_a_session_tool_carries_the_person_that_began_it(acme, place):
    made = place.call("create_session", relationship="independent", prompt="go", title="t")
    child_turn = Turn.objects.get(chat__session_id=made["session"].split("/")[-1])
    assert child_turn.sender == acme.member
    assert ChatToolbox(child_turn).principal().name == "acme-member"


def test_a_member_may_answer_tool_calls(acme, place):
    # Answered by the person whose connection announced the client in the session.
    actions.do_set_active_client(acme.principal("member"), place.session, "ide", {"clientId": "ide", "tools": []})
    call = actions.do_begin_tool_call(place.turn, "ide__open", {}, client_id="ide", timeout_ms=0)
    actions.do_client_complete_tool_call(acme.principal("member"), place.chat, "ide", str(place.turn.id),
                                         str(call.id), {"success": True, "pastTenseMessage": "done"})
    with pytest.raises(Refused) as refused:
        actions.do_client_complete_tool_call(acme.principal("guest"), place.chat, "ide", str(place.turn.id),
                                             str(uuid.uuid4()), {"success": True, "pastTenseMessage": "done"})
    assert refused.value.sentence == "acme-guest may not chat:tool here"
