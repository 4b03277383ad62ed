"""The workbench's tool definitions. None is in the "session" group: they are offered whatever
`sessionTools` says."""
from kernel.refusals import Refused
from sessions_app.models import iso
from tools_app.registry import Tool

from . import actions, agent_merge, artifacts, comments, resources

ONE_BASED_RANGE = {
    "type": "object", "description": "One-based lines (and columns); omit for the whole file.",
    "properties": {"startLine": {"type": "integer", "minimum": 1}, "endLine": {"type": "integer", "minimum": 1},
                   "startColumn": {"type": "integer", "minimum": 1}, "endColumn": {"type": "integer", "minimum": 1}},
    "required": ["startLine"], "additionalProperties": False,
}
IDS = {"type": "array", "items": {"type": "string"}, "minItems": 1}


# Artifacts -----------------------------------------------------------------------------------

def add_artifact_or_reference(context, arguments):
    try:
        entries = [artifacts.parse_item(item) for item in arguments["items"]]
    except artifacts.InvalidArtifact as invalid:
        raise Refused(str(invalid)) from None

    def change(current):
        messages = []
        for entry in entries:
            current, status, kept = artifacts.add(current, entry)
            messages.append(f"{status}: {kept['id']}")
        return current, "\n".join(messages)

    return actions.do_change_artifacts(context.session, change)


def remove_artifact_or_reference(context, arguments):
    wanted = arguments["id"]

    def change(current):
        removed = next((e for e in current if e["id"] == wanted), None)
        if removed is None:
            return current, f"No artifact or reference with id {wanted}."
        noun = "artifact" if removed.get("isArtifact") else "reference"
        return [e for e in current if e is not removed], f"Removed {noun}: {wanted}"

    return actions.do_change_artifacts(context.session, change)


def list_artifacts_and_references(context, arguments):
    current = artifacts.read(context.session.__class__.objects.get(pk=context.session.pk).meta)
    if not current:
        return "No artifacts or references recorded for this session."
    return "\n".join(artifacts.describe(e) for e in current)


ARTIFACT_ITEM = {
    "type": "object",
    "properties": {
        "type": {"type": "string", "enum": list(artifacts.TYPES)},
        "label": {"type": "string", "description": "Short label shown to the person."},
        "isArtifact": {"type": "boolean", "description": f"true for an artifact, false for a reference. "
                                                         f"{artifacts.CLASSIFICATION}"},
        "link": {"type": "string", "description": "http(s) URL; required for pullRequest, issue, commit, website."},
        "uri": {"type": "string", "description": "Absolute URI with its scheme; required for file and resource."},
        "commitHash": {"type": "string", "description": "Required for commit."},
    },
    "required": ["type", "label", "isArtifact"],
}

ARTIFACT_TOOLS = (
    Tool("add_artifact_or_reference", title="Add Artifact or Reference",
         description=("Record artifacts (deliverables: an issue or pull request you create or fix, a result the "
                      "person will reopen) or references (existing things worth looking at) next to the chat input. "
                      "Adding an artifact that matches a reference promotes it and keeps its id."),
         input_schema={"type": "object", "properties": {"items": {"type": "array", "minItems": 1, "items": ARTIFACT_ITEM}},
                       "required": ["items"]},
         executor=add_artifact_or_reference, instruction=artifacts.INSTRUCTION, annotations={"readOnlyHint": False},
         effects=frozenset({"writes"})),
    Tool("remove_artifact_or_reference", title="Remove Artifact or Reference",
         description="Remove an artifact or reference recorded in this session, by id.",
         input_schema={"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
         executor=remove_artifact_or_reference, defer_loading=True,
         annotations={"readOnlyHint": False, "destructiveHint": True}, effects=frozenset({"writes", "destructive"})),
    Tool("list_artifacts_and_references", title="List Artifacts and References",
         description="List the artifacts and references recorded in this session, with their ids.",
         executor=list_artifacts_and_references, defer_loading=True, annotations={"readOnlyHint": True},
         effects=frozenset({"reads"})),
)


# Comments ------------------------------------------------------------------------------------

COMMENT_TOOLS = (
    Tool("addComment", title="Add Comment",
         description=("Propose a code review comment on a file, optionally on a one-based line range. The person "
                      "accepts or dismisses it; it is listed only once accepted."),
         input_schema={"type": "object", "properties": {
             "resource": {"type": "string", "description": "The file's URI."}, "range": ONE_BASED_RANGE,
             "text": {"type": "string", "minLength": 1}}, "required": ["resource", "text"]},
         executor=comments.add_comment, defer_loading=True, effects=frozenset({"writes"})),
    Tool("listComments", title="List Comments",
         description="List the accepted comments on this session's files, each with its kind and authors.",
         input_schema={"type": "object", "properties": {"includeResolved": {"type": "boolean"}}},
         executor=comments.list_comments, defer_loading=True, annotations={"readOnlyHint": True},
         effects=frozenset({"reads"})),
    Tool("replyToComment", title="Reply to Comment", description="Reply to a comment as the agent.",
         input_schema={"type": "object", "properties": {"commentId": {"type": "string"},
                                                        "text": {"type": "string", "minLength": 1}},
                       "required": ["commentId", "text"]},
         executor=comments.reply_to_comment, defer_loading=True, effects=frozenset({"writes"})),
    Tool("deleteComments", title="Delete Comments", description="Delete comments by id.",
         input_schema={"type": "object", "properties": {"commentIds": IDS}, "required": ["commentIds"]},
         executor=comments.delete_comments, defer_loading=True, annotations={"destructiveHint": True},
         effects=frozenset({"writes", "destructive"})),
    Tool("resolveComments", title="Resolve Comments",
         description="Resolve comments by id; with resolved: false, submit them again.",
         input_schema={"type": "object", "properties": {"commentIds": IDS, "resolved": {"type": "boolean"}},
                       "required": ["commentIds"]},
         executor=comments.resolve_comments, defer_loading=True, effects=frozenset({"writes"})),
    Tool("viewUnreviewedComments", title="View Comments",
         description="Ask the person to show the comments waiting for their review; reading one accepts it.",
         executor=comments.view_unreviewed_comments, defer_loading=True, effects=frozenset({"reads", "writes"})),
)


# Resources, terminals, wakeups -----------------------------------------------------------------

MIN_DELAY, MAX_DELAY = 60, 2592000


def schedule_wakeup(context, arguments):
    if arguments.get("stop"):
        cancelled = actions.do_cancel_wakeup(context.chat)
        if cancelled is None:
            return "No wakeup is scheduled in this chat."
        return f"Cancelled the wakeup that was due at {iso(cancelled.due)}."
    delay, prompt = arguments.get("delaySeconds"), arguments.get("prompt")
    if delay is None or not prompt:
        raise Refused("schedule_wakeup needs delaySeconds and prompt, or stop: true.")
    wakeup = actions.do_schedule_wakeup(context.chat, context.turn.sender, prompt, delay)
    return f"Wakeup due at {iso(wakeup.due)} (in {delay} s). It replaces any earlier wakeup of this chat."


HOST_TOOLS = (
    Tool("ahp_resource", title="Read Resource",
         description=("Read a resource by URI: this host's sessions, chats, annotations and tool outputs, or a "
                      "resource a connected client of this session publishes."),
         input_schema={"type": "object", "properties": {"uri": {"type": "string", "minLength": 1}}, "required": ["uri"]},
         executor=resources.ahp_resource, annotations={"readOnlyHint": True}, effects=frozenset({"reads"})),
    Tool("ahp_terminals", title="List Terminals",
         description="List the terminals the host has open, one line each: uri, title, cwd, running.",
         executor=resources.ahp_terminals, annotations={"readOnlyHint": True}, effects=frozenset({"reads"})),
    Tool("schedule_wakeup", title="Schedule Wakeup",
         description=("Wake this chat later with a prompt, as if the person sent it: delaySeconds from 60 to "
                      "2592000. One wakeup per chat: a new call replaces it; stop: true cancels it."),
         input_schema={"type": "object", "properties": {
             "delaySeconds": {"type": "integer", "minimum": MIN_DELAY, "maximum": MAX_DELAY},
             "prompt": {"type": "string", "minLength": 1}, "stop": {"type": "boolean"}}},
         executor=schedule_wakeup, effects=frozenset({"writes"})),
)


# Agent Merge ---------------------------------------------------------------------------------

AGENT_MERGE_TOOLS = (
    Tool("setAgentMergeEnabled", title="Configure Agent Merge",
         description=("Turn Agent Merge on, off or different for this chat's folder: keep its pull request green "
                      "and, if asked, merge it. Answers the configuration in force, including when it merges."),
         input_schema={"type": "object", "properties": {
             "enabled": {"type": "boolean"}, "addressReviews": {"type": "boolean"}, "fixCI": {"type": "boolean"},
             "resolveConflicts": {"type": "boolean"},
             "mergePullRequest": {"type": "string", "enum": ["always", "ifUnchanged", "never"]}},
             "required": ["enabled"], "additionalProperties": False},
         executor=agent_merge.set_agent_merge_enabled, defer_loading=True, effects=frozenset({"writes"})),
    Tool("readAgentMergeCI", title="Read Agent Merge CI",
         description=("Read the failed required checks this Agent Merge turn was asked to fix: a summary with "
                      "evidence ids, then a line-numbered tail, a range, or a literal search of one job's log."),
         input_schema={"type": "object", "properties": {
             "mode": {"type": "string", "enum": ["summary", "tail", "range", "search"]},
             "evidenceId": {"type": "string"}, "jobId": {"type": "string"},
             "startLine": {"type": "integer", "minimum": 1}, "endLine": {"type": "integer", "minimum": 1},
             "lineCount": {"type": "integer", "minimum": 1, "maximum": 200},
             "query": {"type": "string", "minLength": 1, "maxLength": 200},
             "contextLines": {"type": "integer", "minimum": 0, "maximum": 5}}},
         executor=agent_merge.read_agent_merge_ci, defer_loading=True, annotations={"readOnlyHint": True},
         effects=frozenset({"reads", "network"})),
    Tool("replyToAgentMergeReviewThread", title="Reply to Agent Merge Review Thread",
         description="Reply to a review thread this Agent Merge turn was asked to address, then resolve it.",
         input_schema={"type": "object", "properties": {
             "threadId": {"type": "string"}, "body": {"type": "string", "minLength": 1}, "resolve": {"type": "boolean"}},
             "required": ["threadId", "body"]},
         executor=agent_merge.reply_to_agent_merge_review_thread, defer_loading=True,
         effects=frozenset({"writes", "network"})),
    Tool("rerunAgentMergeWorkflow", title="Rerun Agent Merge Workflow",
         description=("Rerun a workflow run of a failed required check of this Agent Merge turn; deferred while "
                      "its current attempt is still going."),
         input_schema={"type": "object", "properties": {
             "runId": {"type": "string"}, "failedJobsOnly": {"type": "boolean"}}, "required": ["runId"]},
         executor=agent_merge.rerun_agent_merge_workflow, defer_loading=True, effects=frozenset({"writes", "network"})),
)

ALL = ARTIFACT_TOOLS + COMMENT_TOOLS + HOST_TOOLS + AGENT_MERGE_TOOLS
