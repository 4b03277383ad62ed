"""The actions a client may dispatch, in one table: for each, the channel it targets and the
grant that channel needs, the check of its fields, the `do_*` that applies it, and what the
connection starts once it is applied (the turn it began).

Each `do_*` checks the finer grant of its own change; the grant here is the one that makes the
target visible at all (a target the client may not read is "not found", never "forbidden").
The target is found before the fields are checked: an action on a channel the client cannot
see is ignored without a word, so it learns nothing of what is there.
"""
from dataclasses import dataclass
from typing import Callable

from kernel.ids import parse_uuid
from kernel.refusals import Refused
from sessions_app import actions
from sessions_app.actions.chats import draft_model
from sessions_app.actions.checks import check_message_text
from sessions_app.channels import ROOT, annotations_session_at, chat_at, session_at
from tools_app import actions as tool_actions
from tools_app.families.comments import actions as comment_actions
from tools_app.families.session.listing import session_config_schema
from tools_app.families.terminals import actions as terminal_actions
from tools_app.families.terminals.actions import terminal_at

from . import terminals
from tools_app.catalog.bounding import bound_result


# Where each channel kind's target is found.
TARGETS = {"session": session_at, "chat": chat_at, "annotations": annotations_session_at, "terminal": terminal_at}


class NoSuchChannel(Exception):
    """The action's channel does not exist for this principal (absent, another tenant's, or one
    it may not read): the session and chat channel specifications have such an action ignored."""


def target(principal, kind, grant, channel):
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


def uuid_in(action, field):
    """The action's `field` as a UUID string; ids the host keys rows by are refused otherwise."""
    key = parse_uuid(action.get(field))
    if key is None:
        article = "an" if field[0] in "aeiou" else "a"
        raise Refused(f"{action.get('type')} needs {article} {field} that is a UUID.", "invalid")
    return str(key)


# Field checks: the action -> the fields its do_* takes, refusing malformed ones. -------------------

def annotation_id(action):
    return {"annotation_id": str(action.get("annotationId"))}


def user_message_text(action):
    """The text of the action's `message`, which a client may send only as the user."""
    message = action.get("message")
    if not isinstance(message, dict) or not isinstance(message.get("text"), str):
        raise Refused(f"{action.get('type')} needs message.text.", "invalid")
    if (message.get("origin") or {}).get("kind", "user") != "user":
        raise Refused("Clients may send only user messages.", "invalid")
    return message["text"]


def turn_started_fields(action):
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


def draft_fields(action):
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


def pending_message_fields(action):
    return {"message_id": uuid_in(action, "id"), "kind": action.get("kind"), "text": user_message_text(action)}


def pending_removal_fields(action):
    return {"message_id": uuid_in(action, "id"), "kind": action.get("kind")}


def turn_fields(action):
    return {"turn_id": uuid_in(action, "turnId")}


def truncation_fields(action):
    return {"turn_id": uuid_in(action, "turnId") if "turnId" in action else None}


def tool_call_fields(action):
    return {"call_id": uuid_in(action, "toolCallId"), "turn_id": uuid_in(action, "turnId")}


def confirmation_fields(action):
    return {"turn_id": uuid_in(action, "turnId"), "call_id": uuid_in(action, "toolCallId")}


def annotation_changes(action):
    return {**annotation_id(action),
            "changes": {k: action[k] for k in ("resolved", "range", "turnId", "resource") if k in action}}


def annotation_entry(action):
    return {**annotation_id(action), "entry_id": str(action.get("entryId"))}


def no_fields(action):
    return {}


def directory_fields(action):
    directory = action.get("directory")
    if not isinstance(directory, str) or not directory or len(directory) > 1000:
        raise Refused(f"{action.get('type')} needs a directory: a URI of at most 1000 characters.", "invalid")
    return {"directory": directory}


def tool_content_fields(action):
    return {**tool_call_fields(action), "content": action.get("content")}


def customization_fields(action):
    if not isinstance(action.get("id"), str):
        raise Refused("session/customizationToggled needs an id that is a string.", "invalid")
    return {"id": action["id"]}


# The do_* calls: (principal, client_id, target, action, fields, origin) -> outcome. --------------

def complete_tool_call(principal, client_id, chat, action, fields, origin):
    call_id, result, full_text = fields["call_id"], action.get("result"), None
    content = result.get("content") if isinstance(result, dict) else None
    if isinstance(content, list) and all(isinstance(c, dict) and isinstance(c.get("text", ""), str) for c in content):
        result, full_text = bound_result(result, call_id)  # a client's text is cut as a host tool's is
    # The whole text is kept for ahp_resource, as a host tool's is, with the completion that
    # names it (a late result keeps nothing: the timeout that beat it is its call's result).
    keep = (lambda: tool_actions.do_keep_full_output(call_id, full_text)) if full_text is not None else None
    actions.do_client_complete_tool_call(principal, client_id, chat, fields["turn_id"], call_id, result, origin, keep)


def no_result_awaits(p, client, chat, a, f, origin):
    # The host never completes a call with requiresResultConfirmation, so no result waits.
    raise Refused(f"Tool call {f['call_id']} has no result waiting for confirmation.", "conflict")


def no_input_request(p, client, chat, a, f, origin):
    # Neither the host's tools nor its agents raise chat/inputRequested; their questions are
    # toolConfirmation entries answered with chat/toolCallConfirmed.
    raise Refused(f"No input request {a.get('requestId')} is open in this chat.", "not_found")


NO_CUSTOMIZATIONS = ("This host keeps no session customizations to toggle; a client's own customizations "
                     "change with session/activeClientSet.")


def no_customizations(p, client, session, a, f, origin):
    # The session's state carries no `customizations`: plugins and rules here are the clients' own.
    raise Refused(NO_CUSTOMIZATIONS, "not_found")


def run_the_turn(consumer, turn):
    if turn is not None:
        consumer.launch_turn(turn.id)


def interrupt_its_agent(consumer, turn):
    consumer.interrupt_turn(turn)


def learn_its_plugins(consumer, active_client):
    if active_client.customizations:
        consumer.learn_client_plugins(active_client)


@dataclass(frozen=True)
class ClientAction:
    channel: str  # the kind of channel it targets: a key of TARGETS, or "root"
    grant: str | None  # the grant on the target's session without which the target is not found
    fields: Callable  # action -> the checked fields the do_* takes
    do: Callable  # (principal, client_id, target, action, fields, origin) -> outcome
    then: Callable | None = None  # (consumer, outcome): what the connection starts once it is applied


CLIENT_ACTIONS = {
    "session/activeClientSet": ClientAction(
        "session", "session:read", no_fields,
        lambda p, client, session, a, f, origin: actions.do_set_active_client(
            p, session, client, a.get("activeClient"), origin),
        then=learn_its_plugins),
    "session/activeClientRemoved": ClientAction(
        "session", "session:read", no_fields,
        lambda p, client, session, a, f, origin: actions.do_remove_active_client(
            p, session, client, a.get("clientId"), origin)),
    "session/titleChanged": ClientAction(
        "session", "session:read", no_fields,
        lambda p, client, session, a, f, origin: actions.do_set_title(p, session, a.get("title"), origin)),
    "session/isArchivedChanged": ClientAction(
        "session", "session:read", no_fields,
        lambda p, client, session, a, f, origin: actions.do_set_flag(
            p, session, "isArchived", a.get("isArchived"), origin)),
    "session/isReadChanged": ClientAction(
        "session", "session:read", no_fields,
        lambda p, client, session, a, f, origin: actions.do_set_flag(p, session, "isRead", a.get("isRead"), origin)),
    "session/configChanged": ClientAction(
        "session", "session:read", no_fields,
        lambda p, client, session, a, f, origin: actions.do_change_session_config(
            p, session, a.get("config"), session_config_schema(session.provider), bool(a.get("replace")), origin)),
    "session/defaultChatChanged": ClientAction(
        "session", "session:read", no_fields,
        lambda p, client, session, a, f, origin: actions.do_set_default_chat(p, session, a.get("defaultChat"), origin)),
    "session/workingDirectorySet": ClientAction(
        "session", "session:read", directory_fields,
        lambda p, client, session, a, f, origin: actions.do_add_working_directory(p, session, f["directory"], origin)),
    "session/workingDirectoryRemoved": ClientAction(
        "session", "session:read", directory_fields,
        lambda p, client, session, a, f, origin: actions.do_remove_working_directory(
            p, session, f["directory"], origin)),
    "session/customizationToggled": ClientAction("session", "session:read", customization_fields, no_customizations),
    "chat/workingDirectorySet": ClientAction(
        "chat", "session:read", directory_fields,
        lambda p, client, chat, a, f, origin: actions.do_set_chat_working_directory(p, chat, f["directory"], origin)),
    "chat/workingDirectoryRemoved": ClientAction(
        "chat", "session:read", directory_fields,
        lambda p, client, chat, a, f, origin: actions.do_remove_chat_working_directory(
            p, chat, f["directory"], origin)),
    "chat/toolCallContentChanged": ClientAction(
        "chat", "session:read", tool_content_fields,
        lambda p, client, chat, a, f, origin: actions.do_client_tool_call_content(
            p, client, chat, f["turn_id"], f["call_id"], f["content"], origin)),
    "chat/turnStarted": ClientAction(
        "chat", "session:read", turn_started_fields,
        lambda p, client, chat, a, f, origin: actions.do_start_turn(
            p, chat, f["turn_id"], f["text"], client, origin, f["model"], f["agent"]),
        then=run_the_turn),
    "chat/turnCancelled": ClientAction(
        "chat", "session:read", turn_fields,
        lambda p, client, chat, a, f, origin: actions.do_cancel_turn(p, chat, f["turn_id"], origin),
        then=interrupt_its_agent),
    "chat/pendingMessageSet": ClientAction(
        "chat", "session:read", pending_message_fields,
        lambda p, client, chat, a, f, origin: actions.do_set_pending_message(
            p, chat, f["message_id"], f["kind"], f["text"], origin),
        then=run_the_turn),
    "chat/draftChanged": ClientAction(
        "chat", "session:read", draft_fields,
        lambda p, client, chat, a, f, origin: actions.do_set_chat_draft(p, chat, f["draft"], origin)),
    "chat/pendingMessageRemoved": ClientAction(
        "chat", "session:read", pending_removal_fields,
        lambda p, client, chat, a, f, origin: actions.do_remove_pending_message(
            p, chat, f["message_id"], f["kind"], origin)),
    "chat/queuedMessagesReordered": ClientAction(
        "chat", "session:read", no_fields,
        lambda p, client, chat, a, f, origin: actions.do_reorder_queued_messages(p, chat, a.get("order"), origin)),
    "chat/truncated": ClientAction(
        "chat", "session:read", truncation_fields,
        lambda p, client, chat, a, f, origin: actions.do_truncate_chat(p, chat, f["turn_id"], origin)),
    "chat/toolCallComplete": ClientAction("chat", "session:read", tool_call_fields, complete_tool_call),
    # Only a host tool that asked the person (viewUnreviewedComments) waits for an answer.
    "chat/toolCallConfirmed": ClientAction(
        "chat", "session:read", confirmation_fields,
        lambda p, client, chat, a, f, origin: comment_actions.do_answer_question(
            p, chat, f["turn_id"], f["call_id"], a.get("approved"), origin)),
    "chat/toolCallResultConfirmed": ClientAction("chat", "session:read", tool_call_fields, no_result_awaits),
    "chat/inputAnswerChanged": ClientAction("chat", "session:read", no_fields, no_input_request),
    "chat/inputCompleted": ClientAction("chat", "session:read", no_fields, no_input_request),
    "root/configChanged": ClientAction(
        "root", None, no_fields,
        lambda p, client, root, a, f, origin: tool_actions.do_change_host_config(
            p, a.get("config"), bool(a.get("replace")), origin)),
    # Terminals: the PTY is written to and resized once the action is applied.
    "terminal/input": ClientAction(
        "terminal", "terminal:read", no_fields,
        lambda p, client, terminal, a, f, origin: terminal_actions.do_terminal_input(p, terminal, a.get("data"), origin),
        then=terminals.type_into),
    "terminal/resized": ClientAction(
        "terminal", "terminal:read", no_fields,
        lambda p, client, terminal, a, f, origin: terminal_actions.do_resize_terminal(
            p, terminal, a.get("cols"), a.get("rows"), origin),
        then=terminals.resize),
    "terminal/claimed": ClientAction(
        "terminal", "terminal:read", no_fields,
        lambda p, client, terminal, a, f, origin: terminal_actions.do_claim_terminal(
            p, terminal, client, a.get("claim"), origin)),
    "terminal/titleChanged": ClientAction(
        "terminal", "terminal:read", no_fields,
        lambda p, client, terminal, a, f, origin: terminal_actions.do_set_terminal_title(
            p, terminal, a.get("title"), origin)),
    "terminal/cleared": ClientAction(
        "terminal", "terminal:read", no_fields,
        lambda p, client, terminal, a, f, origin: terminal_actions.do_clear_terminal(p, terminal, origin)),
    # Annotations: a client's writes take the same writers as the comment tools.
    "annotations/set": ClientAction(
        "annotations", "session:read", no_fields,
        lambda p, client, session, a, f, origin: comment_actions.do_set_annotation(
            p, session, a.get("annotation"), origin)),
    "annotations/updated": ClientAction(
        "annotations", "session:read", annotation_changes,
        lambda p, client, session, a, f, origin: comment_actions.do_update_annotation(
            p, session, f["annotation_id"], f["changes"], origin)),
    "annotations/removed": ClientAction(
        "annotations", "session:read", annotation_id,
        lambda p, client, session, a, f, origin: comment_actions.do_remove_annotation(
            p, session, f["annotation_id"], origin)),
    "annotations/entrySet": ClientAction(
        "annotations", "session:read", annotation_id,
        lambda p, client, session, a, f, origin: comment_actions.do_set_annotation_entry(
            p, session, f["annotation_id"], a.get("entry"), origin)),
    "annotations/entryRemoved": ClientAction(
        "annotations", "session:read", annotation_entry,
        lambda p, client, session, a, f, origin: comment_actions.do_remove_annotation_entry(
            p, session, f["annotation_id"], f["entry_id"], origin)),
}


def apply(principal, client_id, channel, action, origin):
    """Apply a client's action: its entry and outcome, or Refused (the client hears a rejection)."""
    action_type = action.get("type")
    entry = CLIENT_ACTIONS.get(action_type) if isinstance(action_type, str) else None
    if entry is None:
        raise Refused(f"This host does not accept {action_type!r} from clients.", "invalid")
    row = target(principal, entry.channel, entry.grant, channel)
    return entry, entry.do(principal, client_id, row, action, entry.fields(action), origin)
