"""The comment tools: agent feedback kept as annotations on the session's annotations channel.
Ranges are one-based lines and columns here, zero-based on the channel."""
import time
import uuid

from kernel.refusals import Refused
from sessions_app.actions import require
from tools_app.catalog.registry import Tool

from . import actions
from .models import FEEDBACK_KEY, Annotation

QUESTION_SECONDS = 600
QUESTION_POLL_SECONDS = 0.2
OPENING_AUTHOR = {"user": "user", "codeReview": "agent", "prReview": "prReviewer"}


def to_channel_range(value):
    if not value:
        return None
    start_line, end_line = value["startLine"], value.get("endLine", value["startLine"])
    if end_line < start_line:
        raise Refused("range.endLine must not come before range.startLine.")
    return {"start": {"line": start_line - 1, "character": value.get("startColumn", 1) - 1},
            "end": {"line": end_line - 1, "character": value["endColumn"] - 1 if "endColumn" in value else 0}}


def where(row):
    if not row.range:
        return row.resource
    start, end = row.range["start"]["line"] + 1, row.range["end"]["line"] + 1
    return f"{row.resource} line {start}" if start == end else f"{row.resource} lines {start}-{end}"


def text_of(entry):
    text = entry.get("text")
    return text.get("markdown", "") if isinstance(text, dict) else str(text)


def author_of(entry, index, kind):
    slot = (entry.get("_meta") or {}).get(FEEDBACK_KEY)
    if isinstance(slot, dict) and slot.get("author") in ("user", "agent", "prReviewer", "unknown"):
        return slot["author"]
    return OPENING_AUTHOR.get(kind, "unknown") if index == 0 else "user"


def describe(row):
    kind = row.feedback["kind"]
    lines = [f"- {row.annotation_id} [{kind}] {where(row)}{' (resolved)' if is_resolved(row) else ''}"]
    for index, entry in enumerate(row.entries):
        label = "opened by" if index == 0 else "reply from"
        lines.append(f"  {label} {author_of(entry, index, kind)}: {text_of(entry)}")
    return "\n".join(lines)


def is_resolved(row):
    return row.resolved or row.feedback["state"] == "resolved"


def comments_of(session):
    """This session's feedback comments; annotations without feedback meta are someone else's."""
    rows = Annotation.objects.filter(session=session).select_related("session").order_by("created", "pk")
    return [row for row in rows if row.feedback is not None]


def waiting(session):
    return [row for row in comments_of(session) if row.feedback["state"] == "created"]


def with_feedback_state(row, state, resolved=None):
    wire = row.to_wire()
    wire["_meta"] = {**(row.meta or {}), FEEDBACK_KEY: {**row.feedback, "state": state}}
    if resolved is not None:
        wire["resolved"] = resolved
    return wire


def find_own(session, ids):
    mine = {row.annotation_id: row for row in comments_of(session)}
    return [mine[i] for i in ids if i in mine], [i for i in ids if i not in mine]


def add_comment(context, arguments):
    require(context.principal, "session:review", context.session)
    comment_id = str(uuid.uuid4())
    annotation = {
        "id": comment_id, "turnId": str(context.turn.id), "resource": arguments["resource"], "resolved": False,
        "entries": [{"id": f"{comment_id}:0", "text": arguments["text"], "_meta": {FEEDBACK_KEY: {"author": "agent"}}}],
        "_meta": {FEEDBACK_KEY: {"kind": "codeReview", "state": "created", "sessionResource": context.session.uri}},
    }
    channel_range = to_channel_range(arguments.get("range"))
    if channel_range:
        annotation["range"] = channel_range
    actions.do_set_annotation(context.principal, context.session, annotation)
    return (f"Added comment {comment_id}. It is a proposal: listComments shows it once the person accepts it.")


def list_comments(context, arguments):
    include_resolved = bool(arguments.get("includeResolved"))
    rows = comments_of(context.session)
    shown = [r for r in rows if r.feedback["state"] != "created" and (include_resolved or not is_resolved(r))]
    text = "\n".join(describe(r) for r in shown) if shown else "No comments."
    count = sum(1 for r in rows if r.feedback["state"] == "created")
    if count:
        text += (f"\n{count} comment{'s' if count != 1 else ''} wait{'s' if count == 1 else ''} for review; "
                 f"call viewUnreviewedComments to see {'them' if count != 1 else 'it'}.")
    return text


def reply_to_comment(context, arguments):
    require(context.principal, "session:review", context.session)
    found, missing = find_own(context.session, [arguments["commentId"]])
    if missing:
        raise Refused(f"No comment {arguments['commentId']} in this session.")
    entry = {"id": f"{found[0].annotation_id}:{uuid.uuid4().hex[:8]}", "text": arguments["text"],
             "_meta": {FEEDBACK_KEY: {"author": "agent"}}}
    actions.do_set_annotation_entry(context.principal, context.session, found[0].annotation_id, entry)
    return f"Replied to comment {found[0].annotation_id}."


def outcome(done_label, done, missing):
    parts = [f"{done_label}: {', '.join(done) if done else 'none'}."]
    if missing:
        parts.append(f"Not found: {', '.join(missing)}.")
    return "\n".join(parts)


def delete_comments(context, arguments):
    require(context.principal, "session:review", context.session)
    found, missing = find_own(context.session, arguments["commentIds"])
    for row in found:
        actions.do_remove_annotation(context.principal, context.session, row.annotation_id)
    return outcome("Deleted", [r.annotation_id for r in found], missing)


def resolve_comments(context, arguments):
    require(context.principal, "session:review", context.session)
    resolved = arguments.get("resolved", True)
    found, missing = find_own(context.session, arguments["commentIds"])
    for row in found:
        wire = with_feedback_state(row, "resolved" if resolved else "submitted", resolved=resolved)
        actions.do_set_annotation(context.principal, context.session, wire)
    return outcome("Resolved" if resolved else "Submitted again", [r.annotation_id for r in found], missing)


def view_unreviewed_comments(context, arguments):
    require(context.principal, "session:review", context.session)
    rows = waiting(context.session)
    if not rows:
        return "No comments wait for review."
    count = len(rows)
    actions.do_ask(context.tool_call_id, f"Show the agent {count} comment{'s' if count != 1 else ''} waiting "
                                         f"for your review?")
    deadline = time.monotonic() + QUESTION_SECONDS
    question = actions.open_question(context.tool_call_id)
    while question is not None and time.monotonic() < deadline:
        time.sleep(QUESTION_POLL_SECONDS)
        question = actions.open_question(context.tool_call_id)
    if question is not None:
        raise Refused("The person did not answer whether to show the waiting comments.")
    from .models import Question

    if not Question.objects.get(tool_call_id=context.tool_call_id).approved:
        return "The person declined to show the waiting comments."
    shown = []
    for row in waiting(context.session):  # read again: the person may have acted meanwhile
        actions.do_set_annotation(context.principal, context.session, with_feedback_state(row, "submitted"))
        row.meta = {**(row.meta or {}), FEEDBACK_KEY: {**row.feedback, "state": "submitted"}}
        shown.append(describe(row))
    return "\n".join(shown) if shown else "No comments wait for review."


ONE_BASED_RANGE = {
    "type": "object", "description": "One-based lines (and columns); omit for the whole file.",
    "properties": {"startLine": {"type": "integer", "minimum": 1}, "endLine": {"type": "integer", "minimum": 1},
                   "startColumn": {"type": "integer", "minimum": 1}, "endColumn": {"type": "integer", "minimum": 1}},
    "required": ["startLine"], "additionalProperties": False,
}
IDS = {"type": "array", "items": {"type": "string"}, "minItems": 1}

COMMENT_TOOLS = (
    Tool("addComment", title="Add Comment",
         description=("Propose a code review comment on a file, optionally on a one-based line range. The person "
                      "accepts or dismisses it; it is listed only once accepted."),
         input_schema={"type": "object", "properties": {
             "resource": {"type": "string", "description": "The file's URI."}, "range": ONE_BASED_RANGE,
             "text": {"type": "string", "minLength": 1}}, "required": ["resource", "text"]},
         executor=add_comment, defer_loading=True, effects=frozenset({"writes"})),
    Tool("listComments", title="List Comments",
         description="List the accepted comments on this session's files, each with its kind and authors.",
         input_schema={"type": "object", "properties": {"includeResolved": {"type": "boolean"}}},
         executor=list_comments, defer_loading=True, annotations={"readOnlyHint": True},
         effects=frozenset({"reads"})),
    Tool("replyToComment", title="Reply to Comment", description="Reply to a comment as the agent.",
         input_schema={"type": "object", "properties": {"commentId": {"type": "string"},
                                                        "text": {"type": "string", "minLength": 1}},
                       "required": ["commentId", "text"]},
         executor=reply_to_comment, defer_loading=True, effects=frozenset({"writes"})),
    Tool("deleteComments", title="Delete Comments", description="Delete comments by id.",
         input_schema={"type": "object", "properties": {"commentIds": IDS}, "required": ["commentIds"]},
         executor=delete_comments, defer_loading=True, annotations={"destructiveHint": True},
         effects=frozenset({"writes", "destructive"})),
    Tool("resolveComments", title="Resolve Comments",
         description="Resolve comments by id; with resolved: false, submit them again.",
         input_schema={"type": "object", "properties": {"commentIds": IDS, "resolved": {"type": "boolean"}},
                       "required": ["commentIds"]},
         executor=resolve_comments, defer_loading=True, effects=frozenset({"writes"})),
    Tool("viewUnreviewedComments", title="View Comments",
         description="Ask the person to show the comments waiting for their review; reading one accepts it.",
         executor=view_unreviewed_comments, defer_loading=True, effects=frozenset({"reads", "writes"})),
)
