"""A harness's permission request for one of its own built-ins (a shell command, a file write),
as an AHP tool confirmation: the call shows in the chat waiting for the person
(`chat/toolCallReady` with a confirmation title, the session's inputNeeded) and the harness waits
for `chat/toolCallConfirmed`. A tenant's agentConnections entry may say `"permissions":
"approve-all"` instead."""
import asyncio

from kernel.orm import database_sync_to_async
from kernel.refusals import Refused
from sessions_app import actions

from .families.comments import actions as questions

ANSWER_SECONDS = 600
POLL_SECONDS = 0.25


def denied(tool_name):
    return f"The person did not allow {tool_name}."


def unanswered(tool_name):
    return f"Nobody answered whether {tool_name} may run."


def ask(turn, tool_name, arguments, title):
    call = actions.do_begin_tool_call(turn, tool_name, arguments, display_name=tool_name)
    questions.do_ask(call.id, title)
    return call.id


def answer(call_id):
    """True or False once the person answered, None while they have not."""
    from .families.comments.models import Question

    return Question.objects.get(tool_call_id=str(call_id)).approved


def settle(call_id, tool_name, approved):
    if approved:
        result = {"success": True, "pastTenseMessage": f"Allowed {tool_name}",
                  "content": [{"type": "text", "text": f"The person allowed {tool_name}; the agent runs it."}]}
    else:
        result = actions.failure(tool_name, denied(tool_name) if approved is False else unanswered(tool_name))
    actions.do_complete_tool_call(call_id, result)


async def ask_permission(turn, tool_name, arguments, title):
    """None when the person lets the harness run its `tool_name`, else the sentence saying why
    not (they refused, or nobody answered in time)."""
    try:
        call_id = await database_sync_to_async(ask)(turn, tool_name, arguments, title)
    except Refused as refusal:  # the turn ended: nobody will be asked
        return refusal.sentence
    loop = asyncio.get_running_loop()
    deadline = loop.time() + ANSWER_SECONDS
    approved = None
    while approved is None and loop.time() < deadline:
        await asyncio.sleep(POLL_SECONDS)
        approved = await database_sync_to_async(answer)(call_id)
    await database_sync_to_async(settle)(call_id, tool_name, approved)
    if approved:
        return None
    return denied(tool_name) if approved is False else unanswered(tool_name)
