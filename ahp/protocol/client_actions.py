"""The actions a client may dispatch, in one table: for each, the channel it targets and the
grant that channel needs, the check of its fields, its handler (a named function calling the
`do_*` that applies it) and what the connection starts once it is applied (the turn it began).

Each `do_*` checks the finer grant of its own change; the grant here is the one that makes the
target visible at all (a target the client may not read is "not found", never "forbidden").
The target is found before the fields are checked: an action on a channel the client cannot
see is ignored without a word, so it learns nothing of what is there.
"""
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Generic, TypeVar

from grants.models import Principal
from kernel.ids import parse_uuid
from kernel.refusals import Refused
from sessions_app import actions
from sessions_app.actions.chats import draft_model
from sessions_app.actions.checks import check_message_text
from sessions_app.channels import ROOT, annotations_session_at, chat_at, session_at
from sessions_app.models import ActiveClient, Chat, Session, Turn
from tools_app import actions as tool_actions
from tools_app.catalog.bounding import bound_result
from tools_app.families.comments import actions as comment_actions
from tools_app.families.session.listing import session_config_schema
from tools_app.families.terminals import actions as terminal_actions
from tools_app.families.terminals.actions import terminal_at
from tools_app.families.terminals.models import Terminal

from . import terminals

if TYPE_CHECKING:
    from .homes import Asker

Action = dict[str, Any]  # a client action as sent: {"type": ..., its fields}
Fields = dict[str, Any]  # the checked fields a handler takes
Origin = dict[str, Any]  # {"clientId", "clientSeq"}: whose action an envelope carries
Row = TypeVar("Row")  # the row an action acts on: a Session, Chat or Terminal (None on the root)

# Where each channel kind's target is found.
TARGETS: dict[str, Callable[[str, Any], Any]] = {"session": session_at, "chat": chat_at,
                                                 "annotations": annotations_session_at, "terminal": terminal_at}


class NoSuchChannel(Exception):
    """The action's channel does not exist for this principal (absent, another tenant's, or one
    it may not read): the session and chat channel specifications have such an action ignored."""


def target(principal: Principal, kind: str, grant: str | None, channel: str) -> Any:
    """The row on `channel` the action acts on; one the principal may not `grant` is not there."""
    if kind == "root":
        if channel != ROOT:
            raise Refused("root/configChanged belongs on ahp-root://.", "invalid")
        return None
    find = TARGETS[kind]
    row = find(channel, principal.tenant)
    if row is None or not principal.may(grant, row.session if kind in ("chat", "terminal") else row):
        raise NoSuchChannel(channel)
    return row


def uuid_in(action: Action, field: str) -> str:
    """The action's `field` as a UUID string; ids the host keys rows by are refused otherwise."""
    key = parse_uuid(action.get(field))
    if key is None:
        article = "an" if field[0] in "aeiou" else "a"
        raise Refused(f"{action.get('type')} needs {article} {field} that is a UUID.", "invalid")
    return str(key)


# Field checks: the action -> the fields its do_* takes, refusing malformed ones. -------------------

def annotation_id(action: Action) -> Fields:
    return {"annotation_id": str(action.get("annotationId"))}


def user_message_text(action: Action) -> str:
    """The text of the action's `message`, which a client may send only as the user."""
    message = action.get("message")
    if not isinstance(message, dict) or not isinstance(message.get("text"), str):
        raise Refused(f"{action.get('type')} needs message.text.", "invalid")
    if (message.get("origin") or {}).get("kind", "user") != "user":
        raise Refused("Clients may send only user messages.", "invalid")
    return message["text"]


def turn_started_fields(action: Action) -> Fields:
    text = user_message_text(action)
    turn_id = parse_uuid(action.get("turnId"))
    if turn_id is None:
        raise Refused("chat/turnStarted needs a turnId that is a UUID.", "invalid")
    model = (action.get("message") or {}).get("model")
    model = model.get("id") if isinstance(model, dict) else model
    if model is not None and (not isinstance(model, str) or len(model) > 200):
        raise Refused("message.model must be a model id or {id}.", "invalid")
    agent = (action.get("message") or {}).get("agent")
    if agent is not None and not (isinstance(agent, dict) and isinstance(agent.get("uri"), str)):
        raise Refused("message.agent must be an AgentSelection {uri}.", "invalid")
    return {"turn_id": turn_id, "text": text, "model": model or "", "agent": agent and agent["uri"]}


def draft_fields(action: Action) -> Fields:
    """A draft is a Message, or absent to clear it; its model an id or {id}."""
    draft = action.get("draft")
    if draft is None:
        return {"draft": None}
    if not isinstance(draft, dict) or not isinstance(draft.get("text"), str):
        raise Refused("chat/draftChanged needs draft.text, or no draft to clear it.", "invalid")
    check_message_text(draft["text"])
    model = draft_model(draft)
    if model is not None and (not isinstance(model, str) or len(model) > 200):
        raise Refused("draft.model must be a model id or {id}.", "invalid")
    return {"draft": draft}


def pending_message_fields(action: Action) -> Fields:
    return {"message_id": uuid_in(action, "id"), "kind": action.get("kind"), "text": user_message_text(action)}


def pending_removal_fields(action: Action) -> Fields:
    return {"message_id": uuid_in(action, "id"), "kind": action.get("kind")}


def turn_fields(action: Action) -> Fields:
    return {"turn_id": uuid_in(action, "turnId")}


def truncation_fields(action: Action) -> Fields:
    return {"turn_id": uuid_in(action, "turnId") if "turnId" in action else None}


def tool_call_fields(action: Action) -> Fields:
    return {"call_id": uuid_in(action, "toolCallId"), "turn_id": uuid_in(action, "turnId")}


def confirmation_fields(action: Action) -> Fields:
    return {"turn_id": uuid_in(action, "turnId"), "call_id": uuid_in(action, "toolCallId")}


def annotation_changes(action: Action) -> Fields:
    return {**annotation_id(action),
            "changes": {k: action[k] for k in ("resolved", "range", "turnId", "resource") if k in action}}


def annotation_entry(action: Action) -> Fields:
    return {**annotation_id(action), "entry_id": str(action.get("entryId"))}


def no_fields(action: Action) -> Fields:
    return {}


def directory_fields(action: Action) -> Fields:
    directory = action.get("directory")
    if not isinstance(directory, str) or not directory or len(directory) > 1000:
        raise Refused(f"{action.get('type')} needs a directory: a URI of at most 1000 characters.", "invalid")
    return {"directory": directory}


def tool_content_fields(action: Action) -> Fields:
    return {**tool_call_fields(action), "content": action.get("content")}


def customization_fields(action: Action) -> Fields:
    if not isinstance(action.get("id"), str):
        raise Refused("session/customizationToggled needs an id that is a string.", "invalid")
    return {"id": action["id"]}


# The handlers: one per action type, each `(call) -> outcome`, calling the do_* that applies it. ----

@dataclass(frozen=True)
class ActionCall(Generic[Row]):
    """One client action being applied: who sent it, from which connection, the row it acts on,
    the action as sent, its checked fields and the origin its envelope carries."""
    principal: Principal
    client_id: str
    target: Row
    action: Action
    fields: Fields
    origin: Origin


def set_active_client(call: ActionCall[Session]) -> Any:
    return actions.do_set_active_client(call.principal, call.target, call.client_id, call.action.get("activeClient"),
                                        origin=call.origin)


def remove_active_client(call: ActionCall[Session]) -> Any:
    return actions.do_remove_active_client(call.principal, call.target, call.client_id, call.action.get("clientId"),
                                           origin=call.origin)


def set_title(call: ActionCall[Session]) -> Any:
    return actions.do_set_title(call.principal, call.target, call.action.get("title"), origin=call.origin)


def set_archived(call: ActionCall[Session]) -> Any:
    return actions.do_set_flag(call.principal, call.target, "isArchived", call.action.get("isArchived"), origin=call.origin)


def set_read(call: ActionCall[Session]) -> Any:
    return actions.do_set_flag(call.principal, call.target, "isRead", call.action.get("isRead"), origin=call.origin)


def change_session_config(call: ActionCall[Session]) -> Any:
    schema = session_config_schema(call.target.provider)
    return actions.do_change_session_config(call.principal, call.target, call.action.get("config"), schema,
                                            bool(call.action.get("replace")), origin=call.origin)


def set_default_chat(call: ActionCall[Session]) -> Any:
    return actions.do_set_default_chat(call.principal, call.target, call.action.get("defaultChat"), origin=call.origin)


def add_working_directory(call: ActionCall[Session]) -> Any:
    return actions.do_add_working_directory(call.principal, call.target, call.fields["directory"], origin=call.origin)


def remove_working_directory(call: ActionCall[Session]) -> Any:
    return actions.do_remove_working_directory(call.principal, call.target, call.fields["directory"], origin=call.origin)


NO_CUSTOMIZATIONS = ("This host keeps no session customizations to toggle; a client's own customizations "
                     "change with session/activeClientSet.")


def toggle_customization(call: ActionCall[Session]) -> None:
    # The session's state carries no `customizations`: plugins and rules here are the clients' own.
    raise Refused(NO_CUSTOMIZATIONS, "not_found")


def set_chat_working_directory(call: ActionCall[Chat]) -> Any:
    return actions.do_set_chat_working_directory(call.principal, call.target, call.fields["directory"], origin=call.origin)


def remove_chat_working_directory(call: ActionCall[Chat]) -> Any:
    return actions.do_remove_chat_working_directory(call.principal, call.target, call.fields["directory"], origin=call.origin)


def change_tool_call_content(call: ActionCall[Chat]) -> Any:
    return actions.do_client_tool_call_content(call.principal, call.target, call.client_id, call.fields["turn_id"],
                                               call.fields["call_id"], call.fields["content"], origin=call.origin)


def start_turn(call: ActionCall[Chat]) -> Any:
    fields = call.fields
    return actions.do_start_turn(call.principal, call.target, fields["turn_id"], fields["text"], call.client_id,
                                 fields["model"], fields["agent"], origin=call.origin)


def cancel_turn(call: ActionCall[Chat]) -> Any:
    return actions.do_cancel_turn(call.principal, call.target, call.fields["turn_id"], origin=call.origin)


def set_pending_message(call: ActionCall[Chat]) -> Any:
    fields = call.fields
    return actions.do_set_pending_message(call.principal, call.target, fields["message_id"], fields["kind"],
                                          fields["text"], origin=call.origin)


def change_draft(call: ActionCall[Chat]) -> Any:
    return actions.do_set_chat_draft(call.principal, call.target, call.fields["draft"], origin=call.origin)


def remove_pending_message(call: ActionCall[Chat]) -> Any:
    return actions.do_remove_pending_message(call.principal, call.target, call.fields["message_id"],
                                             call.fields["kind"], origin=call.origin)


def reorder_queued_messages(call: ActionCall[Chat]) -> Any:
    return actions.do_reorder_queued_messages(call.principal, call.target, call.action.get("order"), origin=call.origin)


def truncate_chat(call: ActionCall[Chat]) -> Any:
    return actions.do_truncate_chat(call.principal, call.target, call.fields["turn_id"], origin=call.origin)


def complete_tool_call(call: ActionCall[Chat]) -> Any:
    call_id, result, full_text = call.fields["call_id"], call.action.get("result"), None
    content = result.get("content") if isinstance(result, dict) else None
    if isinstance(result, dict) and isinstance(content, list) and all(isinstance(c, dict) and isinstance(c.get("text", ""), str) for c in content):
        result, full_text = bound_result(result, call_id)  # a client's text is cut as a host tool's is
    # The whole text is kept for ahp_resource, as a host tool's is, with the completion that
    # names it (a late result keeps nothing: the timeout that beat it is its call's result).
    keep = (lambda: tool_actions.do_keep_full_output(call_id, full_text)) if full_text is not None else None
    return actions.do_client_complete_tool_call(call.principal, call.target, call.client_id, call.fields["turn_id"],
                                                call_id, result, origin=call.origin, keep=keep)


def confirm_tool_call(call: ActionCall[Chat]) -> Any:
    # Only a host tool that asked the person (viewUnreviewedComments) waits for an answer.
    return comment_actions.do_answer_question(call.principal, call.target, call.fields["turn_id"],
                                              call.fields["call_id"], call.action.get("approved"), origin=call.origin)


def confirm_tool_call_result(call: ActionCall[Chat]) -> None:
    # The host never completes a call with requiresResultConfirmation, so no result waits.
    raise Refused(f"Tool call {call.fields['call_id']} has no result waiting for confirmation.", "conflict")


def answer_input_request(call: ActionCall[Chat]) -> None:
    """chat/inputAnswerChanged and chat/inputCompleted: neither the host's tools nor its agents
    raise chat/inputRequested; their questions are toolConfirmation entries answered with
    chat/toolCallConfirmed."""
    raise Refused(f"No input request {call.action.get('requestId')} is open in this chat.", "not_found")


def change_host_config(call: ActionCall[None]) -> Any:
    return tool_actions.do_change_host_config(call.principal, call.action.get("config"),
                                              bool(call.action.get("replace")), origin=call.origin)


def type_into_terminal(call: ActionCall[Terminal]) -> Any:
    return terminal_actions.do_terminal_input(call.principal, call.target, call.action.get("data"), origin=call.origin)


def resize_terminal(call: ActionCall[Terminal]) -> Any:
    return terminal_actions.do_resize_terminal(call.principal, call.target, call.action.get("cols"),
                                               call.action.get("rows"), origin=call.origin)


def claim_terminal(call: ActionCall[Terminal]) -> Any:
    return terminal_actions.do_claim_terminal(call.principal, call.target, call.client_id, call.action.get("claim"),
                                              origin=call.origin)


def set_terminal_title(call: ActionCall[Terminal]) -> Any:
    return terminal_actions.do_set_terminal_title(call.principal, call.target, call.action.get("title"), origin=call.origin)


def clear_terminal(call: ActionCall[Terminal]) -> Any:
    return terminal_actions.do_clear_terminal(call.principal, call.target, origin=call.origin)


# Annotations: a client's writes take the same writers as the comment tools.

def set_annotation(call: ActionCall[Session]) -> Any:
    return comment_actions.do_set_annotation(call.principal, call.target, call.action.get("annotation"), origin=call.origin)


def update_annotation(call: ActionCall[Session]) -> Any:
    return comment_actions.do_update_annotation(call.principal, call.target, call.fields["annotation_id"],
                                                call.fields["changes"], origin=call.origin)


def remove_annotation(call: ActionCall[Session]) -> Any:
    return comment_actions.do_remove_annotation(call.principal, call.target, call.fields["annotation_id"], origin=call.origin)


def set_annotation_entry(call: ActionCall[Session]) -> Any:
    return comment_actions.do_set_annotation_entry(call.principal, call.target, call.fields["annotation_id"],
                                                   call.action.get("entry"), origin=call.origin)


def remove_annotation_entry(call: ActionCall[Session]) -> Any:
    return comment_actions.do_remove_annotation_entry(call.principal, call.target, call.fields["annotation_id"],
                                                      call.fields["entry_id"], origin=call.origin)


# What the connection starts once an action is applied: (consumer, outcome). ---------------------

def run_the_turn(consumer: "Asker", turn: Turn | None) -> None:
    if turn is not None:
        consumer.launch_turn(turn.id)


def interrupt_its_agent(consumer: "Asker", turn: Turn) -> None:
    consumer.interrupt_turn(turn)


def learn_its_plugins(consumer: "Asker", active_client: ActiveClient) -> None:
    if active_client.customizations:
        consumer.learn_client_plugins(active_client)


Handler = Callable[[ActionCall[Any]], Any]
Then = Callable[["Asker", Any], None]


@dataclass(frozen=True)
class ClientAction:
    channel: str  # the kind of channel it targets: a key of TARGETS, or "root"
    grant: str | None  # the grant on the target's session without which the target is not found
    fields: Callable[[Action], Fields]  # the checked fields its handler takes, refusing malformed ones
    handler: Handler  # applies it: its do_*
    then: Then | None = None  # what the connection starts once it is applied


SESSION, CHAT, TERMINAL, ANNOTATIONS = (("session", "session:read"), ("chat", "session:read"),
                                         ("terminal", "terminal:read"), ("annotations", "session:read"))

CLIENT_ACTIONS: dict[str, ClientAction] = {
    "session/activeClientSet": ClientAction(*SESSION, no_fields, set_active_client, then=learn_its_plugins),
    "session/activeClientRemoved": ClientAction(*SESSION, no_fields, remove_active_client),
    "session/titleChanged": ClientAction(*SESSION, no_fields, set_title),
    "session/isArchivedChanged": ClientAction(*SESSION, no_fields, set_archived),
    "session/isReadChanged": ClientAction(*SESSION, no_fields, set_read),
    "session/configChanged": ClientAction(*SESSION, no_fields, change_session_config),
    "session/defaultChatChanged": ClientAction(*SESSION, no_fields, set_default_chat),
    "session/workingDirectorySet": ClientAction(*SESSION, directory_fields, add_working_directory),
    "session/workingDirectoryRemoved": ClientAction(*SESSION, directory_fields, remove_working_directory),
    "session/customizationToggled": ClientAction(*SESSION, customization_fields, toggle_customization),
    "chat/workingDirectorySet": ClientAction(*CHAT, directory_fields, set_chat_working_directory),
    "chat/workingDirectoryRemoved": ClientAction(*CHAT, directory_fields, remove_chat_working_directory),
    "chat/toolCallContentChanged": ClientAction(*CHAT, tool_content_fields, change_tool_call_content),
    "chat/turnStarted": ClientAction(*CHAT, turn_started_fields, start_turn, then=run_the_turn),
    "chat/turnCancelled": ClientAction(*CHAT, turn_fields, cancel_turn, then=interrupt_its_agent),
    "chat/pendingMessageSet": ClientAction(*CHAT, pending_message_fields, set_pending_message, then=run_the_turn),
    "chat/draftChanged": ClientAction(*CHAT, draft_fields, change_draft),
    "chat/pendingMessageRemoved": ClientAction(*CHAT, pending_removal_fields, remove_pending_message),
    "chat/queuedMessagesReordered": ClientAction(*CHAT, no_fields, reorder_queued_messages),
    "chat/truncated": ClientAction(*CHAT, truncation_fields, truncate_chat),
    "chat/toolCallComplete": ClientAction(*CHAT, tool_call_fields, complete_tool_call),
    "chat/toolCallConfirmed": ClientAction(*CHAT, confirmation_fields, confirm_tool_call),
    "chat/toolCallResultConfirmed": ClientAction(*CHAT, tool_call_fields, confirm_tool_call_result),
    "chat/inputAnswerChanged": ClientAction(*CHAT, no_fields, answer_input_request),
    "chat/inputCompleted": ClientAction(*CHAT, no_fields, answer_input_request),
    "root/configChanged": ClientAction("root", None, no_fields, change_host_config),
    # Terminals: the PTY is written to and resized once the action is applied.
    "terminal/input": ClientAction(*TERMINAL, no_fields, type_into_terminal, then=terminals.type_into),
    "terminal/resized": ClientAction(*TERMINAL, no_fields, resize_terminal, then=terminals.resize),
    "terminal/claimed": ClientAction(*TERMINAL, no_fields, claim_terminal),
    "terminal/titleChanged": ClientAction(*TERMINAL, no_fields, set_terminal_title),
    "terminal/cleared": ClientAction(*TERMINAL, no_fields, clear_terminal),
    "annotations/set": ClientAction(*ANNOTATIONS, no_fields, set_annotation),
    "annotations/updated": ClientAction(*ANNOTATIONS, annotation_changes, update_annotation),
    "annotations/removed": ClientAction(*ANNOTATIONS, annotation_id, remove_annotation),
    "annotations/entrySet": ClientAction(*ANNOTATIONS, annotation_id, set_annotation_entry),
    "annotations/entryRemoved": ClientAction(*ANNOTATIONS, annotation_entry, remove_annotation_entry),
}


def apply(principal: Principal, client_id: str, channel: str, action: Action,
          origin: Origin) -> tuple[ClientAction, Any]:
    """Apply a client's action: its entry and outcome, or Refused (the client hears a rejection)."""
    action_type = action.get("type")
    entry = CLIENT_ACTIONS.get(action_type) if isinstance(action_type, str) else None
    if entry is None:
        raise Refused(f"This host does not accept {action_type!r} from clients.", "invalid")
    row = target(principal, entry.channel, entry.grant, channel)
    return entry, entry.handler(ActionCall(principal, client_id, row, action, entry.fields(action), origin))
