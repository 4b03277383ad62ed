"""Tool calls of a turn: begun, completed by the host or a client, refused, expired at their
deadline."""
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, cast

from django.db import transaction
from django.utils import timezone

from grants.models import Principal
from kernel.refusals import Refused
from kernel.rows import ITS_ROW, updating

from .. import queries
from ..events.delivery import wake
from ..events.log import Item, Origin, publish_many
from ..models import PUBLISHED_TOOLS, Chat, ToolCall, Turn
from ..state import client_execution_request, confirmation_request
from .checks import client_taken, require

TURN_OVER = "The turn has ended; nothing more runs in it."

ToolResult = dict[str, Any]  # AHP's ToolCallResult: success, pastTenseMessage, content, error


def chat_of(call: ToolCall) -> Chat:
    """The chat of a call of a turn (only a sessionless call has no turn, and none shows it in a chat)."""
    return cast(Turn, call.turn).chat


def failure(tool_name: str, message: str, text: str | None = None) -> ToolResult:
    return {"success": False, "pastTenseMessage": f"{tool_name} failed", "error": {"message": message},
            "content": [{"type": "text", "text": text or message}]}


def _call_action(call: ToolCall, action_type: str, origin: Origin | None = None, **fields: Any) -> Item:
    """A chat tool call action as a publish_many item."""
    action = {"type": action_type, "turnId": str(call.turn_id), "toolCallId": str(call.id), **fields}
    return (chat_of(call).uri, action, origin)


def _ready_fields(call: ToolCall) -> dict[str, Any]:
    fields: dict[str, Any] = {"invocationMessage": call.invocation_message(), "toolInput": call.input_text(),
              "confirmed": "not-needed"}
    if call.contributor:
        fields["contributor"] = call.contributor
    return fields


@transaction.atomic
def do_begin_tool_call(turn: Turn, tool_name: str, arguments: dict[str, Any], display_name: str = "",
                       client_id: str = "", timeout_ms: int = 0, source: str = "", call_id: uuid.UUID | None = None,
                       waker: str = "") -> ToolCall:
    """The agent calls a tool: the call shows in the chat, running; a client's call is also
    listed in the session's inputNeeded until it completes, or fails at its deadline, and its
    completion wakes the agent on the channel `waker`. A turn
    that ended (cancelled, truncated) begins no more calls, whatever its agent still tries.
    `turn` is the caller's, its chat and session loaded: they are not read again."""
    call_id = call_id or uuid.uuid4()
    session = turn.chat.session
    now = timezone.now()
    deadline = now + timedelta(milliseconds=timeout_ms) if client_id and timeout_ms else None
    call = ToolCall(id=call_id, turn=turn, tenant_id=session.tenant_id, tool_name=tool_name,
                    display_name=display_name or tool_name, input=arguments, contributor_client_id=client_id,
                    waker=waker, deadline=deadline, timeout_ms=timeout_ms if deadline else 0, created=now,
                    status="running", source=source or ("client" if client_id else ""))
    # The call's part is appended, with the call written, by the UPDATE that finds the turn still
    # active (and locks it until commit, so the turn cannot end between the check and the call).
    if not queries.append_part_if_active(turn.pk, {"kind": "toolCall", "toolCallId": str(call_id)}, call):
        raise Refused(TURN_OVER, "conflict")  # rolls the call back with this transaction
    start: dict[str, Any] = {"toolName": tool_name, "displayName": call.display_name}
    if call.contributor:
        start["contributor"] = call.contributor
    items = [_call_action(call, "chat/toolCallStart", **start), _call_action(call, "chat/toolCallReady", **_ready_fields(call))]
    if client_id:
        items.append((session.uri, {"type": "session/inputNeededSet", "request": client_execution_request(call)}, None))
    publish_many(session.tenant_id, items)
    return call


def do_record_sessionless_call(principal: Principal, tool_name: str, arguments: object, result: ToolResult, source: str,
                               started: datetime) -> ToolCall:
    """A call through the sessionless door, ran or refused: audited like a turn's call, naming
    the person and no session. Nobody subscribes to it, so nothing is published."""
    return ToolCall.objects.create(tenant=principal.tenant, caller=principal.person, tool_name=tool_name,
                                   display_name=tool_name, input=arguments if isinstance(arguments, dict) else {},
                                   source=source, status="completed", result=result, created=started,
                                   completed=timezone.now())


def finish_call(call: ToolCall, result: ToolResult, origin: Origin | None = None) -> None:
    """Complete a locked, open call (readying it first if it was still streaming)."""
    items = []
    if call.status == "streaming":
        items.append(_call_action(call, "chat/toolCallReady", **_ready_fields(call)))
    call.status = "completed"
    call.result = result
    call.completed = timezone.now()
    items.append(_call_action(call, "chat/toolCallComplete", origin, result=result))
    session = chat_of(call).session
    if call.contributor_client_id:
        items.append((session.uri, {"type": "session/inputNeededRemoved", "id": str(call.id)}, None))
    publish_many(session.tenant_id, items, updating(call, "status", "result", "completed"))
    if call.waker:
        wake(call.waker, call.id, result)


def cancel_open_calls(turn: Turn, reason: str = "The turn was cancelled.") -> None:
    """The turn was cancelled (or its runner died: `reason` says which): every call it still
    waits on ends with a cancelled result (a question to the person leaves the session's
    inputNeeded too)."""
    calls = ToolCall.objects.select_for_update(of=ITS_ROW).select_related("turn__chat__session").filter(
        turn=turn, completed__isnull=True)
    for call in calls:
        asked = call.confirmation == "asked"
        if asked:  # completed from pending-confirmation, as the protocol's reducer defaults it
            call.confirmation = "not-needed"
            call.save(update_fields=["confirmation"])
        finish_call(call, {"success": False, "pastTenseMessage": f"{call.tool_name} was cancelled",
                           "error": {"message": reason, "code": "cancelled"}})
        if asked:
            publish_many(turn.chat.session.tenant_id,
                         [(turn.chat.session.uri, {"type": "session/inputNeededRemoved", "id": str(call.id)}, None)])


def locked_open_call(call_id: uuid.UUID | str, turn: Turn | None = None) -> ToolCall | None:
    """The open call `call_id`, locked, or None. Given its `turn` (the caller's, its chat and
    session loaded, as a host call's runner holds them) only the call's row is read, by a
    hand-written statement: the turn's columns (every part of a long reply) and the session's
    (its published tools) were most of what a host call's completion decoded."""
    if turn is None:
        return (ToolCall.objects.select_for_update(of=ITS_ROW).select_related("turn__chat__session")
                .defer(f"turn__chat__session__{PUBLISHED_TOOLS}").filter(id=call_id, completed__isnull=True).first())
    call = queries.locked_open_call(call_id)
    if call is not None:
        call.turn = turn
    return call


@transaction.atomic(savepoint=False)
def do_complete_tool_call(call_id: uuid.UUID | str, result: ToolResult, turn: Turn | None = None) -> bool:
    """The host completes a call it ran (of `turn`, when the caller holds it). Answers False
    when the call was already complete. Within a caller's transaction it takes no savepoint
    (two more statements): no caller goes on after it failed."""
    call = locked_open_call(call_id, turn)
    if call is None:
        return False
    finish_call(call, result)
    return True


@transaction.atomic
def do_refuse_tool_call(turn: Turn, tool_name: str, arguments: dict[str, Any], sentence: str) -> ToolResult:
    """A call the snapshot refused: shown complete and failed, naming no client, so the client
    is never asked and the chat shows exactly what the model saw."""
    call = do_begin_tool_call(turn, tool_name, arguments)
    result = failure(tool_name, sentence)
    finish_call(call, result)  # begun in this transaction: nobody else can have it yet
    return result


def _check_result(result: object) -> ToolResult:
    if not isinstance(result, dict) or not isinstance(result.get("success"), bool):
        raise Refused("result.success must be true or false.", "invalid")
    message = result.get("pastTenseMessage")
    if not isinstance(message, (str, dict)):
        raise Refused("result.pastTenseMessage must be a string or {markdown}.", "invalid")
    content = result.get("content", [])
    if not isinstance(content, list) or not all(
            isinstance(c, dict) and (c.get("type") != "text" or isinstance(c.get("text"), str)) for c in content):
        raise Refused("result.content must be an array of content items; a text item's text is a string.", "invalid")
    return result


def do_client_complete_tool_call(principal: Principal, chat: Chat, client_id: str, turn_id: uuid.UUID | str,
                                 tool_call_id: uuid.UUID | str, result: object, *, origin: Origin | None = None,
                                 keep: Callable[[], object] | None = None) -> None:
    """A client's result for its call (as it sent it, refused unless a well-formed ToolCallResult). `keep` (the caller's, e.g. the whole text of a result cut
    for the model) is written in the same transaction when this result is the call's, so nobody
    woken by the completion can look for it before it is there."""
    with transaction.atomic():
        require(principal, "chat:tool", chat.session)
        checked = _check_result(result)
        call, announced = _clients_call(chat, turn_id, tool_call_id, client_id, principal.person_id)
        if call.completed is not None:
            raise Refused(f"Tool call {tool_call_id} is already complete.", "conflict")
        # Only the connection of the person who announced the client in this session answers for it.
        if not announced:
            raise Refused(client_taken(client_id))
        if call.deadline is None or call.deadline > timezone.now():
            if keep is not None:
                keep()
            finish_call(call, checked, origin)
            return
        # Past its deadline the call has failed, whether or not a waiter or the sweep got to it
        # yet: the timeout is its result (committed here), and this late one is refused.
        finish_call(call, _timeout_failure(call))
    raise Refused(f"Tool call {tool_call_id} timed out before this result came.", "conflict")


def _clients_call(chat: Chat, turn_id: uuid.UUID | str, tool_call_id: uuid.UUID | str, client_id: str,
                  person_id: int | None) -> tuple[ToolCall, bool]:
    """(call, announced) as queries.locked_call_in, refused unless the call is there and `client_id` runs it."""
    call, announced = queries.locked_call_in(chat, turn_id, tool_call_id, client_id, person_id)
    if call is None:
        raise Refused(f"No tool call {tool_call_id} in turn {turn_id} of this chat.", "not_found")
    if call.contributor_client_id != client_id:
        raise Refused(f"Tool call {tool_call_id} belongs to {call.contributor_client_id or 'the host'}, "
                      f"not {client_id}.")
    return call, announced


def _timeout_failure(call: ToolCall) -> ToolResult:
    message = f"{call.tool_name} got no answer from {call.contributor_client_id} in {call.timeout_ms / 1000:g} s"
    return failure(call.tool_name, message)


@transaction.atomic
def do_expire_tool_call(call_id: uuid.UUID | str) -> bool:
    """At its deadline a client's call fails. Idempotent: fires once, and never before."""
    call = locked_open_call(call_id)
    if call is None or call.deadline is None or call.deadline > timezone.now():
        return False
    finish_call(call, _timeout_failure(call))
    return True


@transaction.atomic
def do_ask_about_tool_call(call_id: uuid.UUID | str, title: str) -> None:
    """A running call asks the person first: back to pending-confirmation, and waiting in the
    session's inputNeeded until do_confirm_tool_call."""
    call = ToolCall.objects.select_for_update(of=ITS_ROW).select_related("turn__chat__session").get(id=call_id)
    call.confirmation, call.confirmation_title = "asked", title
    call.save(update_fields=["confirmation", "confirmation_title"])
    publish_many(chat_of(call).session.tenant_id, [
        _call_action(call, "chat/toolCallReady", invocationMessage=call.invocation_message(),
                     toolInput=call.input_text(), confirmationTitle=title),
        (chat_of(call).session.uri, {"type": "session/inputNeededSet", "request": confirmation_request(call)}, None),
    ])


@transaction.atomic
def do_confirm_tool_call(call_id: uuid.UUID | str, approved: bool, *, origin: Origin | None = None) -> None:
    """The person's answer to a call's question (chat/toolCallConfirmed)."""
    call = ToolCall.objects.select_for_update(of=ITS_ROW).select_related("turn__chat__session").get(id=call_id)
    call.confirmation = "user-action" if approved else "denied"
    call.save(update_fields=["confirmation"])
    answer = {"approved": approved, **({"confirmed": "user-action"} if approved else {"reason": "denied"})}
    publish_many(chat_of(call).session.tenant_id, [
        _call_action(call, "chat/toolCallConfirmed", origin, **answer),
        (chat_of(call).session.uri, {"type": "session/inputNeededRemoved", "id": str(call.id)}, None),
    ])


def _check_partial_content(content: object) -> None:
    if not isinstance(content, list) or not all(
            isinstance(c, dict) and isinstance(c.get("type"), str)
            and (c["type"] != "text" or isinstance(c.get("text"), str))
            for c in content):
        raise Refused("chat/toolCallContentChanged needs content: an array of content items; a text item's text "
                      "is a string.", "invalid")


def do_client_tool_call_content(principal: Principal, chat: Chat, client_id: str, turn_id: uuid.UUID | str,
                                tool_call_id: uuid.UUID | str, content: list[dict[str, Any]],
                                *, origin: Origin | None = None) -> None:
    """chat/toolCallContentChanged: what the client running its call has so far, shown on the running
    call (`content` replaces the last); kept in the call's result until the real result replaces it."""
    with transaction.atomic():
        require(principal, "chat:tool", chat.session)
        _check_partial_content(content)
        call, announced = _clients_call(chat, turn_id, tool_call_id, client_id, principal.person_id)
        if call.status != "running" or call.confirmation == "asked":
            raise Refused(f"Tool call {tool_call_id} is not running.", "conflict")
        if not announced:
            raise Refused(client_taken(client_id))
        call.result = {"content": content}
        changed = _call_action(call, "chat/toolCallContentChanged", origin, content=content)
        publish_many(chat.session.tenant_id, [changed],
                     updating(call, "result"))
