"""The comment tools: agent feedback kept as annotations on the session's annotations channel.
Names, input schemas, answers and refusals follow the reference host's (VS Code's agent host,
`agentFeedbackServerTools.ts`): ranges are one-based lines and columns here, zero-based on the
channel; answers are JSON. `replyToComment` is this host's own, and so are `listComments`'
`includeResolved` and the `author` of a comment and of each of its replies (read from each entry's
`_meta`, as VS Code's agentFeedbackAnnotations.ts stamps and resolves it)."""
import json
import uuid

from kernel.refusals import Refused
from sessions_app.actions import require
from tools_app.catalog.registry import Tool

from . import actions
from .models import FEEDBACK_KEY, Annotation

QUESTION_SECONDS = 600
QUESTION_POLL_SECONDS = 0.2
# Kinds a review produced (not the person): still `created`, they wait for the person's review.
REVIEWABLE_KINDS = ("prReview", "codeReview")


def invalid(tool_name, problem):
    return Refused(f"Invalid {tool_name} input: {problem}", "invalid")


def required_string(value, field, tool_name):
    if not isinstance(value, str) or not value:
        raise invalid(tool_name, f"{field} must be a non-empty string.")
    return value


def positive_integer(value, field, tool_name):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value) or value < 1:
        raise invalid(tool_name, f"{field} must be a positive integer.")
    return int(value)


def comment_ids(arguments, tool_name):
    value = arguments.get("commentIds")
    if not isinstance(value, list) or not value:
        raise invalid(tool_name, "commentIds must be a non-empty string array.")
    return list(dict.fromkeys(required_string(item, "commentIds[]", tool_name) for item in value))


def to_channel_range(value):
    names = ("startLineNumber", "startColumn", "endLineNumber", "endColumn")
    start_line, start_column, end_line, end_column = (
        positive_integer(value.get(n), f"range.{n}", "addComment") for n in names)
    return {"start": {"line": start_line - 1, "character": start_column - 1},
            "end": {"line": end_line - 1, "character": end_column - 1}}


def from_channel_range(value):
    if not value:
        return {"startLineNumber": 1, "startColumn": 1, "endLineNumber": 1, "endColumn": 1}
    return {"startLineNumber": value["start"]["line"] + 1, "startColumn": value["start"]["character"] + 1,
            "endLineNumber": value["end"]["line"] + 1, "endColumn": value["end"]["character"] + 1}


def text_of(entry):
    text = entry.get("text")
    return text.get("markdown", "") if isinstance(text, dict) else str(text)


# Who wrote an entry: `_meta["vscode.agentFeedback"].author` on the entry, as VS Code's
# agentFeedbackAnnotations.ts stamps it. An entry without one falls back as VS Code's
# resolveFeedbackEntryAuthor does: the opening entry to its comment's kind, a reply to the person.
AUTHORS = ("user", "agent", "prReviewer", "unknown")
AUTHOR_OF_KIND = {"user": "user", "codeReview": "agent", "prReview": "prReviewer"}


def author_of(entry, index, kind):
    meta = entry.get("_meta")
    slot = meta.get(FEEDBACK_KEY) if isinstance(meta, dict) else None
    author = slot.get("author") if isinstance(slot, dict) else None
    if author in AUTHORS:
        return author
    return AUTHOR_OF_KIND.get(kind, "unknown") if index == 0 else "user"


def serialized(row, resolved=None):
    """A comment as the tools answer it: its opening entry's text and `author`, and each reply as
    {author, text}, so the model tells the person's words from an agent's or a reviewer's."""
    kind = row.feedback["kind"]
    comment = {"id": row.annotation_id, "resourceUri": row.resource, "range": from_channel_range(row.range),
               "text": text_of(row.entries[0]), "author": author_of(row.entries[0], 0, kind), "kind": kind,
               "resolved": row.resolved if resolved is None else resolved}
    replies = [{"author": author_of(entry, i, kind), "text": text_of(entry)}
               for i, entry in enumerate(row.entries[1:], start=1)]
    if replies:
        comment["replies"] = replies
    return comment


def answer(payload):
    return json.dumps(payload, indent=2)


def comments_of(session):
    """This session's feedback comments; annotations without feedback meta are someone else's."""
    rows = Annotation.objects.filter(session=session).select_related("session").order_by("created", "pk")
    return [row for row in rows if row.feedback is not None and row.entries]


def listable(session):
    """What the agent sees: every comment except those still `created` (not yet accepted)."""
    return [row for row in comments_of(session) if row.resolved or row.feedback["state"] != "created"]


def waiting(session):
    """Review comments the person has not reviewed yet."""
    return [row for row in comments_of(session) if row.feedback["kind"] in REVIEWABLE_KINDS and not row.resolved
            and row.feedback["state"] == "created"]


def unreviewed_note(session):
    rows = waiting(session)
    if not rows:
        return None
    counts = {kind: sum(1 for r in rows if r.feedback["kind"] == kind) for kind in REVIEWABLE_KINDS}
    clauses = [f"{n} {label} comment{'' if n == 1 else 's'}" for label, n in
               (("pull request", counts["prReview"]), ("code review", counts["codeReview"])) if n]
    verb = "is" if len(rows) == 1 else "are"
    return (f"There {verb} {' and '.join(clauses)} which the user has not reviewed yet. If the user wants you to "
            "tackle them, call the `viewUnreviewedComments` tool to view them.")


def with_feedback_state(row, state, resolved=None):
    wire = row.to_wire()
    wire["_meta"] = {**(row.meta or {}), FEEDBACK_KEY: {**row.feedback, "state": state}}
    if resolved is not None:
        wire["resolved"] = resolved
    return wire


def add_comment(context, arguments):
    require(context.principal, "session:review", context.session)
    resource = required_string(arguments.get("resourceUri"), "resourceUri", "addComment")
    text = required_string(arguments.get("text"), "text", "addComment")
    if not isinstance(arguments.get("range"), dict):
        raise invalid("addComment", "range must be an object.")
    comment_id = str(uuid.uuid4())
    # Proposed (`created`): the person accepts it before it is acted upon.
    actions.do_set_annotation(context.principal, context.session, {
        "id": comment_id, "turnId": str(context.turn.id), "resource": resource, "resolved": False,
        "range": to_channel_range(arguments["range"]),
        "entries": [{"id": f"{comment_id}:0", "text": text, "_meta": {FEEDBACK_KEY: {"author": "agent"}}}],
        "_meta": {FEEDBACK_KEY: {"kind": "codeReview", "state": "created", "sessionResource": context.session.uri}},
    })
    return "Comment added."


def list_comments(context, arguments):
    """Accepted comments; resolved ones only when `includeResolved` is true."""
    include_resolved = arguments.get("includeResolved", False)
    if not isinstance(include_resolved, bool):
        raise invalid("listComments", "includeResolved must be a boolean.")
    payload = {"comments": [serialized(row) for row in listable(context.session)
                            if include_resolved or not row.resolved]}
    note = unreviewed_note(context.session)
    if note:
        payload["note"] = note
    return answer(payload)


def reply_to_comment(context, arguments):
    require(context.principal, "session:review", context.session)
    comment_id = required_string(arguments.get("commentId"), "commentId", "replyToComment")
    row = next((r for r in listable(context.session) if r.annotation_id == comment_id), None)
    if row is None:
        raise Refused(f"No comment {comment_id} in this session.", "not_found")
    entry = {"id": f"{row.annotation_id}:{uuid.uuid4().hex[:8]}",
             "text": required_string(arguments.get("text"), "text", "replyToComment"),
             "_meta": {FEEDBACK_KEY: {"author": "agent"}}}
    actions.do_set_annotation_entry(context.principal, context.session, row.annotation_id, entry)
    return answer({"repliedCommentId": row.annotation_id})


def delete_comments(context, arguments):
    require(context.principal, "session:review", context.session)
    ids = comment_ids(arguments, "deleteComments")
    rows = {row.annotation_id: row for row in listable(context.session)}
    deleted = [i for i in ids if i in rows]
    for comment_id in deleted:
        actions.do_remove_annotation(context.principal, context.session, comment_id)
    return answer({"deletedCommentIds": deleted, "notFoundCommentIds": [i for i in ids if i not in rows],
                   "remainingComments": [serialized(r) for i, r in rows.items() if i not in deleted]})


def resolve_comments(context, arguments):
    require(context.principal, "session:review", context.session)
    ids = comment_ids(arguments, "resolveComments")
    resolved = arguments.get("resolved", True)
    if not isinstance(resolved, bool):
        raise invalid("resolveComments", "resolved must be a boolean.")
    rows = {row.annotation_id: row for row in listable(context.session)}
    updated = [i for i in ids if i in rows]
    for comment_id in updated:
        wire = with_feedback_state(rows[comment_id], "resolved" if resolved else "submitted", resolved=resolved)
        actions.do_set_annotation(context.principal, context.session, wire)
    return answer({"resolved": resolved, "updatedCommentIds": updated,
                   "notFoundCommentIds": [i for i in ids if i not in rows],
                   "comments": [serialized(r, resolved if i in updated else None) for i, r in rows.items()]})


def view_unreviewed_comments(context, arguments):
    """Asks the person first; the comments they let through are answered and become accepted."""
    require(context.principal, "session:review", context.session)
    rows = waiting(context.session)
    if not rows:
        return answer({"comments": []})
    count = len(rows)
    approved = actions.ask_and_wait(context.tool_call_id, f"Show the agent {count} comment{'s' if count != 1 else ''} "
                                    "waiting for your review?", QUESTION_SECONDS, QUESTION_POLL_SECONDS)
    if approved is None:
        raise Refused("The person did not answer whether to show the waiting comments.")
    if not approved:
        return "The person declined to show the waiting comments."
    shown = []
    for row in waiting(context.session):  # read again: the person may have acted meanwhile
        actions.do_set_annotation(context.principal, context.session, with_feedback_state(row, "submitted"))
        shown.append(serialized(row))
    return answer({"comments": shown})


NUMBER = {"type": "number"}
ONE_BASED_RANGE = {
    "type": "object", "description": "One-based text range to comment on.",
    "properties": {"startLineNumber": {**NUMBER, "description": "One-based start line number."},
                   "startColumn": {**NUMBER, "description": "One-based start column."},
                   "endLineNumber": {**NUMBER, "description": "One-based end line number."},
                   "endColumn": {**NUMBER, "description": "One-based end column."}},
    "required": ["startLineNumber", "startColumn", "endLineNumber", "endColumn"],
}
NO_INPUT = {"type": "object", "properties": {}}


def ids_schema(verb):
    return {"type": "array", "items": {"type": "string"}, "description": f"Comment IDs to {verb}."}


COMMENT_TOOLS = (
    Tool("addComment", title="Add Comment (Agent Feedback)", description="Add a comment to a file range.",
         input_schema={"type": "object", "properties": {
             "resourceUri": {"type": "string", "description": "URI of the file to add a comment to."},
             "range": ONE_BASED_RANGE, "text": {"type": "string", "description": "Comment text to add."}},
             "required": ["resourceUri", "range", "text"]},
         executor=add_comment, defer_loading=True, annotations={"readOnlyHint": False},
         effects=frozenset({"writes"})),
    Tool("listComments", title="List Comments (Agent Feedback)", description="List comments for this session.",
         input_schema={"type": "object", "properties": {
             "includeResolved": {"type": "boolean",
                                 "description": "Also list resolved comments. Defaults to false."}}},
         executor=list_comments, defer_loading=True, annotations={"readOnlyHint": True},
         effects=frozenset({"reads"})),
    Tool("replyToComment", title="Reply to Comment (Agent Feedback)", description="Reply to a comment as the agent.",
         input_schema={"type": "object", "properties": {
             "commentId": {"type": "string", "description": "The comment to reply to."},
             "text": {"type": "string", "description": "Reply text."}}, "required": ["commentId", "text"]},
         executor=reply_to_comment, defer_loading=True, annotations={"readOnlyHint": False},
         effects=frozenset({"writes"})),
    Tool("deleteComments", title="Delete Comments (Agent Feedback)", description="Delete comments for this session.",
         input_schema={"type": "object", "properties": {"commentIds": ids_schema("delete")},
                       "required": ["commentIds"]},
         executor=delete_comments, defer_loading=True, annotations={"readOnlyHint": False, "destructiveHint": True},
         effects=frozenset({"writes", "destructive"})),
    Tool("resolveComments", title="Resolve Comments (Agent Feedback)",
         description="Mark comments for this session as resolved or unresolved.",
         input_schema={"type": "object", "properties": {
             "commentIds": ids_schema("update"),
             "resolved": {"type": "boolean",
                          "description": "Whether the comments should be marked as resolved. Defaults to true."}},
             "required": ["commentIds"]},
         executor=resolve_comments, defer_loading=True, annotations={"readOnlyHint": False},
         effects=frozenset({"writes"})),
    Tool("viewUnreviewedComments", title="View Unreviewed Comments (Agent Feedback)",
         description=("View pull request or code review comments that the user has not reviewed yet. Calling this "
                      "asks the user to choose which of those comments to reveal; only the comments the user "
                      "reveals are returned."),
         input_schema=NO_INPUT, executor=view_unreviewed_comments, defer_loading=True,
         annotations={"readOnlyHint": True}, effects=frozenset({"reads", "writes"})),
)
