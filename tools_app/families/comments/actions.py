"""Every change of comments (the session's annotations) and of questions a tool asks the person:
one `do_*` function each, which checks the grant, writes in one transaction and publishes what
subscribers see with sessions_app.events.publish."""
import time

from django.db import transaction

from kernel.refusals import Refused
from sessions_app import actions as session_actions
from sessions_app import events
from sessions_app.actions import require
from sessions_app.channels import annotations_uri
from sessions_app.models import ToolCall

from .models import Annotation, Question

# Annotations (comments) ----------------------------------------------------------------------

def _string_or_markdown(value):
    return isinstance(value, str) or (isinstance(value, dict) and isinstance(value.get("markdown"), str))


def _check_entry(entry):
    if not isinstance(entry, dict) or not isinstance(entry.get("id"), str) or not entry["id"]:
        raise Refused("An annotation entry needs a string id.", "invalid")
    if not _string_or_markdown(entry.get("text")):
        raise Refused("An annotation entry's text is a string or {markdown}.", "invalid")
    if "_meta" in entry and not isinstance(entry["_meta"], dict):
        raise Refused("An annotation entry's _meta is an object.", "invalid")


def _check_range(value):
    def position(p):
        return (isinstance(p, dict) and all(isinstance(p.get(k), int) and not isinstance(p.get(k), bool)
                                            and p[k] >= 0 for k in ("line", "character")))

    if value is not None and not (isinstance(value, dict) and position(value.get("start")) and position(value.get("end"))):
        raise Refused("An annotation range is {start: {line, character}, end: {line, character}}, zero-based.", "invalid")


def _check_annotation(annotation):
    if not isinstance(annotation, dict) or not isinstance(annotation.get("id"), str) or not annotation["id"]:
        raise Refused("An annotation needs a string id.", "invalid")
    if not isinstance(annotation.get("resource"), str) or not annotation["resource"]:
        raise Refused("An annotation needs the resource it is anchored to.", "invalid")
    entries = annotation.get("entries")
    if not isinstance(entries, list) or not entries:
        raise Refused("An annotation must contain at least one entry.", "invalid")
    for entry in entries:
        _check_entry(entry)
    _check_range(annotation.get("range"))
    if "_meta" in annotation and not isinstance(annotation["_meta"], dict):
        raise Refused("An annotation's _meta is an object.", "invalid")


def _publish_annotations(session, action, origin=None):
    return events.publish(session.tenant_id, annotations_uri(session), action, origin)


def _locked_annotation(session, annotation_id):
    row = Annotation.objects.select_for_update().filter(session=session, annotation_id=annotation_id).first()
    if row is None:
        raise Refused(f"No annotation {annotation_id} on this session.", "not_found")
    return row


@transaction.atomic
def do_set_annotation(principal, session, annotation, *, origin=None):
    """annotations/set: add an annotation, or replace it whole."""
    require(principal, "session:review", session)
    _check_annotation(annotation)
    row, _ = Annotation.objects.update_or_create(
        session=session, annotation_id=annotation["id"],
        defaults={"turn_id": str(annotation.get("turnId") or ""), "resource": annotation["resource"],
                  "range": annotation.get("range"), "resolved": bool(annotation.get("resolved", False)),
                  "entries": annotation["entries"], "meta": annotation.get("_meta")},
    )
    _publish_annotations(session, {"type": "annotations/set", "annotation": row.to_wire()}, origin)
    return row


@transaction.atomic
def do_update_annotation(principal, session, annotation_id, changes, *, origin=None):
    """annotations/updated: resolve, reopen or re-anchor an annotation without its entries."""
    require(principal, "session:review", session)
    row = _locked_annotation(session, annotation_id)
    action = {"type": "annotations/updated", "annotationId": annotation_id}
    if "resolved" in changes:
        if not isinstance(changes["resolved"], bool):
            raise Refused("resolved must be true or false.", "invalid")
        row.resolved = action["resolved"] = changes["resolved"]
    if "range" in changes:
        _check_range(changes["range"])
        row.range = action["range"] = changes["range"]
    for field, column in (("turnId", "turn_id"), ("resource", "resource")):
        if field in changes:
            if not isinstance(changes[field], str):
                raise Refused(f"{field} must be a string.", "invalid")
            setattr(row, column, changes[field])
            action[field] = changes[field]
    row.save()
    _publish_annotations(session, action, origin)
    return row


@transaction.atomic
def do_remove_annotation(principal, session, annotation_id, *, origin=None):
    require(principal, "session:review", session)
    _locked_annotation(session, annotation_id).delete()
    _publish_annotations(session, {"type": "annotations/removed", "annotationId": annotation_id}, origin)


@transaction.atomic
def do_set_annotation_entry(principal, session, annotation_id, entry, *, origin=None):
    """annotations/entrySet: add an entry to an annotation, or replace one by id."""
    require(principal, "session:review", session)
    _check_entry(entry)
    row = _locked_annotation(session, annotation_id)
    ids = [e.get("id") for e in row.entries]
    row.entries = ([*row.entries[:ids.index(entry["id"])], entry, *row.entries[ids.index(entry["id"]) + 1:]]
                   if entry["id"] in ids else [*row.entries, entry])
    row.save(update_fields=["entries"])
    _publish_annotations(session, {"type": "annotations/entrySet", "annotationId": annotation_id, "entry": entry},
                         origin)
    return row


@transaction.atomic
def do_remove_annotation_entry(principal, session, annotation_id, entry_id, *, origin=None):
    """annotations/entryRemoved; removing the last entry removes the annotation instead."""
    require(principal, "session:review", session)
    row = _locked_annotation(session, annotation_id)
    if entry_id not in [e.get("id") for e in row.entries]:
        raise Refused(f"No entry {entry_id} in annotation {annotation_id}.", "not_found")
    remaining = [e for e in row.entries if e.get("id") != entry_id]
    if not remaining:
        row.delete()
        _publish_annotations(session, {"type": "annotations/removed", "annotationId": annotation_id}, origin)
        return None
    row.entries = remaining
    row.save(update_fields=["entries"])
    _publish_annotations(session, {"type": "annotations/entryRemoved", "annotationId": annotation_id,
                                   "entryId": entry_id}, origin)
    return row


# Questions a tool asks the person ------------------------------------------------------------

@transaction.atomic
def do_ask(tool_call_id, title):
    """The running call asks the person (sessions_app shows it pending-confirmation, in the
    session's inputNeeded) and its tool waits for the answer, chat/toolCallConfirmed."""
    call = ToolCall.objects.select_related("turn").get(id=tool_call_id)
    question = Question.objects.create(tool_call_id=str(call.id), chat_id=call.turn.chat_id, turn=call.turn, title=title)
    session_actions.do_ask_about_tool_call(call.id, title)
    return question


def open_question(tool_call_id):
    return Question.objects.filter(tool_call_id=str(tool_call_id), approved__isnull=True).first()


def ask_and_wait(tool_call_id, title, seconds, poll_seconds):
    """Asks the person (`do_ask`) from a tool's own thread and waits at most `seconds` for the
    answer: True or False, or None when none came."""
    do_ask(tool_call_id, title)
    deadline = time.monotonic() + seconds
    while open_question(tool_call_id) is not None:
        if time.monotonic() >= deadline:
            return None
        time.sleep(poll_seconds)
    return Question.objects.get(tool_call_id=str(tool_call_id)).approved


@transaction.atomic
def do_answer_question(principal, chat, turn_id, tool_call_id, approved, *, origin=None):
    """The person answers a tool's question (chat/toolCallConfirmed)."""
    require(principal, "chat:answer", chat.session)
    question = Question.objects.select_for_update().filter(
        tool_call_id=str(tool_call_id), chat=chat, turn_id=str(turn_id), approved__isnull=True).first()
    if question is None:
        raise Refused(f"Tool call {tool_call_id} is not waiting for confirmation.", "conflict")
    if not isinstance(approved, bool):
        raise Refused("approved must be true or false.", "invalid")
    question.approved = approved
    question.save(update_fields=["approved"])
    session_actions.do_confirm_tool_call(tool_call_id, approved, origin=origin)
    return question
