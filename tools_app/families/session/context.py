"""get_session_context: a chat's newest turns at level summary, digest or full, and a paged
read of one long reply."""
import json

from kernel.ids import parse_uuid
from kernel.refusals import Refused
from sessions_app.actions import require
from sessions_app.models import PendingMessage, ToolCall, Turn

from ...chat_provider import other_harness
from .links import resolve
from .listing import chat_status

REPLY_CAPS = {"summary": 280, "digest": 2000, "full": 8000}
PAGE_CHARS = 8000
ERROR_CHARS = 200
DEFAULT_TURNS, MAX_TURNS = 10, 50


def reply_text(turn):
    return "\n".join(p.get("content", "") for p in turn.response_parts if p.get("kind") == "markdown")


def call_entry(call, detail):
    entry = {"name": call.tool_name, "status": call.status}
    result = call.result or {}
    if call.status == "cancelled":
        entry["reason"] = result.get("reason", "skipped")
    elif call.status == "completed" and result.get("success"):
        entry["ok"] = True
    elif call.status == "completed":
        entry["status"] = "failed"
        entry["error"] = ((result.get("error") or {}).get("message") or "")[:ERROR_CHARS]
    if detail == "full":
        entry["input"] = call.input
    return entry


def turn_entry(turn, detail, calls):
    entry = {"turnId": str(turn.id), "state": turn.state, "message": turn.text}
    reply = reply_text(turn)
    cap = REPLY_CAPS[detail]
    entry["assistant"] = reply[:cap]
    if len(reply) > cap:
        entry["assistantTruncated"] = True
        entry["responseTurnId"] = str(turn.id)
    if detail != "summary":
        entry["toolCalls"] = [call_entry(c, detail) for c in calls.get(turn.pk, ())]
    return entry


def page(chat, arguments):
    turn = Turn.objects.filter(chat=chat, pk=parse_uuid(arguments["responseTurnId"])).first()
    if turn is None:
        raise Refused(f"No turn {arguments['responseTurnId']} in that chat.", "not_found")
    reply = reply_text(turn)
    offset = max(0, int(arguments.get("responseOffset") or 0))
    end = min(len(reply), offset + PAGE_CHARS)
    answer = {"responseTurnId": str(turn.id), "responseOffset": offset, "response": reply[offset:end],
              "responseLength": len(reply), "truncated": end < len(reply)}
    if end < len(reply):
        answer["nextResponseOffset"] = end
    return answer


def get_session_context(context, arguments):
    principal = context.principal
    require(principal, "session:read", context.session)
    session, chat = resolve(principal, arguments["session"])
    require(principal, "chat:turns", session)
    if arguments.get("responseTurnId"):
        return json.dumps(page(chat, arguments))
    detail = arguments.get("detail") or "summary"
    limit = max(1, min(MAX_TURNS, int(arguments.get("transcriptLimit") or DEFAULT_TURNS)))
    ended = Turn.objects.filter(chat=chat).exclude(state="active").order_by("-started")
    newest = list(ended[:limit + 1])
    older = len(newest) > limit
    newest = list(reversed(newest[:limit]))
    active = Turn.objects.filter(chat=chat, state="active").first()
    shown = newest + ([active] if active else [])
    calls = {}
    if detail != "summary":
        for call in ToolCall.objects.filter(turn__in=shown).order_by("created"):
            calls.setdefault(call.turn_id, []).append(call)
    answer = {"session": session.uri, "chat": chat.uri, "title": chat.title or session.title,
              "status": chat_status(chat), "turns": [turn_entry(t, detail, calls) for t in newest],
              "hasOlderTurns": older}
    if active:
        answer["activeTurn"] = turn_entry(active, detail, calls)
    harness = other_harness(chat)
    if harness:  # the chat runs another agent than its session
        answer["harness"] = harness
    if context.chat is not None:
        mine = PendingMessage.objects.filter(chat=chat, sender_chat=context.chat).order_by("created")
        answer["messagesSentByMe"] = [
            {"messageId": str(m.id), "revision": m.revision, "delivery": m.delivery, "status": m.status,
             "message": m.text} for m in mine]
    return json.dumps(answer)
