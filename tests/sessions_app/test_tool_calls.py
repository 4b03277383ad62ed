"""A tool call's begin: written with its turn's part, or not at all."""
import uuid

import pytest

from kernel.refusals import Refused
from sessions_app import actions
from sessions_app.events.numbering import current_seq
from sessions_app.models import ToolCall, Turn


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("ending", ["end", "cancel"])
def test_a_turn_that_ended_begins_no_more_calls_and_keeps_no_trace_of_one(acme, ending):
    """The agent of a turn that ended (or was cancelled) still calls a tool: it is told the turn
    is over, and the chat shows no such call: no row, no part of the turn, no action."""
    principal = acme.principal("member")
    session = actions.do_create_session(principal, str(uuid.uuid4()))
    chat = session.chats.get()
    turn = actions.do_start_turn(principal, chat, uuid.uuid4(), "hello")
    if ending == "end":
        actions.do_end_turn(turn.id, "the answer")
    else:
        actions.do_cancel_turn(principal, chat, turn.id)
    turn = Turn.objects.select_related("chat__session").get(pk=turn.pk)
    parts, seq = turn.response_parts, current_seq(session.tenant_id)

    with pytest.raises(Refused) as refused:
        actions.do_begin_tool_call(turn, "list_sessions", {})

    assert refused.value.sentence == "The turn has ended; nothing more runs in it."
    assert not ToolCall.objects.filter(turn=turn).exists()
    assert Turn.objects.get(pk=turn.pk).response_parts == parts
    assert current_seq(session.tenant_id) == seq
