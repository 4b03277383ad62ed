"""The Agent Merge tools. `setAgentMergeEnabled` configures the calling chat's folder; the
other three answer only inside a repair turn Agent Merge started (an AgentMergeRepair row) and
only for what that turn was asked to fix."""
import json

from kernel.refusals import Refused
from sessions_app.models import ChatBackend
from tools_app.catalog.registry import Tool

from ..comments import actions as questions
from ..comments import tools as comment_tools
from . import actions, github
from .models import AgentMergeRepair, CIEvidence, DeferredRerun

END_THE_TURN = ("End this turn instead of reaching for another GitHub tool or the GitHub CLI; Agent Merge "
                "starts a new repair turn when there is something it may fix.")
TAIL_LINES, MAX_RANGE_LINES, SEARCH_CONTEXT = 100, 200, 2


NO_FOLDER = ("setAgentMergeEnabled configures a folder's pull request, and this chat has no folder: give its "
             "session a working directory (set_workspace) first.")


def folder_of(context):
    """The calling chat's folder: its own (a chat kept in a folder of its own), else its session's first."""
    own = ChatBackend.objects.filter(chat_id=context.chat.id).values_list("working_directory", flat=True).first() \
        if context.chat is not None else None
    folder = own or (context.session.working_directories or [""])[0]
    if not folder:
        raise Refused(NO_FOLDER, "invalid")
    return folder


def set_agent_merge_enabled(context, arguments):
    options = {k: v for k, v in arguments.items() if k != "enabled"}
    config = actions.do_set_agent_merge(context.session, folder_of(context), arguments["enabled"], options)
    return json.dumps(config.to_wire())


def repair_of(context, tool_name):
    repair = AgentMergeRepair.objects.filter(turn_id=context.turn.id).first()
    if repair is None:
        raise Refused(f"{tool_name} answers only inside a repair turn Agent Merge started. {END_THE_TURN}")
    return repair


def not_asked(what):
    return Refused(f"{what} is not among what this Agent Merge turn was asked to fix. {END_THE_TURN}")


def numbered(lines, first):
    return "\n".join(f"{first + i}: {line}" for i, line in enumerate(lines))


def evidence_for(repair, job_id):
    evidence = CIEvidence.objects.filter(repair=repair, job_id=job_id).first()
    if evidence is None:
        check = next((c for c in repair.failed_checks if job_id in {str(j) for j in c.get("jobIds", ())}), {})
        log = github.adapter().job_log(repair.repository, job_id)
        evidence = actions.do_record_ci_evidence(repair, job_id, check.get("name", ""), log)
    return evidence


def read_agent_merge_ci(context, arguments):
    repair = repair_of(context, "readAgentMergeCI")
    mode = arguments.get("mode", "summary")
    if mode == "summary":
        jobs = sorted(repair.authorized_jobs())
        if arguments.get("jobId") is not None:
            if str(arguments["jobId"]) not in jobs:
                raise not_asked(f"Job {arguments['jobId']}")
            jobs = [str(arguments["jobId"])]
        parts = []
        for job_id in jobs:
            evidence = evidence_for(repair, job_id)
            lines = evidence.log.splitlines()
            parts.append(f"Check {evidence.check_name or '?'} job {job_id}: evidence {evidence.id}, {len(lines)} lines. "
                         f"Last lines:\n{numbered(lines[-10:], max(1, len(lines) - 9))}")
        return "\n\n".join(parts) if parts else "This turn has no failed jobs to read."
    evidence = CIEvidence.objects.filter(id=arguments.get("evidenceId"), repair=repair).first()
    if evidence is None:
        raise Refused(f"No evidence {arguments.get('evidenceId')} in this repair turn; read the summary first.")
    lines = evidence.log.splitlines()
    if mode == "tail":
        count = arguments.get("lineCount", TAIL_LINES)
        first = max(1, len(lines) - count + 1)
        return numbered(lines[first - 1:], first) + "\n(complete: this is the end of the log)"
    if mode == "range":
        start = arguments.get("startLine", 1)
        end = min(arguments.get("endLine", start + MAX_RANGE_LINES - 1), start + MAX_RANGE_LINES - 1, len(lines))
        return numbered(lines[start - 1:end], start) if start <= len(lines) else f"The log has {len(lines)} lines."
    query = arguments.get("query", "").lower()
    if not query:
        raise Refused("search needs a query.")
    context_lines = arguments.get("contextLines", SEARCH_CONTEXT)
    hits = [i for i, line in enumerate(lines) if i + 1 >= arguments.get("startLine", 1) and query in line.lower()]
    if not hits:
        return f"No line of evidence {evidence.id} contains {arguments['query']!r}."
    blocks = []
    for i in hits[:20]:
        low, high = max(0, i - context_lines), min(len(lines), i + context_lines + 1)
        blocks.append(numbered(lines[low:high], low + 1))
    return "\n--\n".join(blocks)


def reply_to_agent_merge_review_thread(context, arguments):
    repair = repair_of(context, "replyToAgentMergeReviewThread")
    thread = next((t for t in repair.review_threads if t.get("threadId") == arguments["threadId"]), None)
    if thread is None:
        raise not_asked(f"Review thread {arguments['threadId']}")
    hub = github.adapter()
    # Published first, so a thread is never resolved without the answer that resolves it.
    reply = hub.reply_to_review_comment(repair.repository, repair.pull_number, thread["commentId"], arguments["body"])
    if reply["pending"]:
        actions.do_stop_watch_at_pending_review(repair)
        return ("pending: the reply landed in the person's pending review, so it is not published and the thread "
                "stays open until they submit that review; Agent Merge stops watching the pull request until then.")
    if arguments.get("resolve", True):
        hub.resolve_thread(arguments["threadId"])
        return f"Replied to review thread {arguments['threadId']} and resolved it."
    return f"Replied to review thread {arguments['threadId']}."


def rerun_agent_merge_workflow(context, arguments):
    repair = repair_of(context, "rerunAgentMergeWorkflow")
    run_id = str(arguments["runId"])
    if run_id not in repair.authorized_runs():
        raise not_asked(f"Workflow run {run_id}")
    failed_only = arguments.get("failedJobsOnly", True)
    if DeferredRerun.objects.filter(repair=repair, run_id=run_id, done=False).exists():
        return f"deferred: the rerun of run {run_id} is already waiting for its current attempt to finish."
    what = f"{'the failed jobs of ' if failed_only else ''}workflow run {run_id}"
    approved = questions.ask_and_wait(context.tool_call_id, f"Rerun {what} of {repair.repository}#{repair.pull_number}?",
                                      comment_tools.QUESTION_SECONDS, comment_tools.QUESTION_POLL_SECONDS)
    if not approved:
        return (f"The person declined to rerun {what}." if approved is False
                else f"Nobody answered whether to rerun {what}; it was not rerun.")
    hub = github.adapter()
    run = hub.workflow_run(repair.repository, run_id)
    if run["status"] in github.ACTIVE_RUN_STATUSES:
        actions.do_defer_rerun(repair, run_id, failed_only)
        return (f"deferred: run {run_id}'s current attempt is still {run['status']}; Agent Merge reruns it when it "
                f"finishes. Do not poll or ask again.")
    hub.rerun(repair.repository, run_id, failed_only)
    return f"Asked GitHub to rerun {'the failed jobs of ' if failed_only else ''}run {run_id}."


def perform_deferred_reruns():
    """The sweep: a deferred rerun happens once its run's attempt is over."""
    done = 0
    for deferred in DeferredRerun.objects.filter(done=False).select_related("repair"):
        hub = github.adapter()
        repair = deferred.repair
        if hub.workflow_run(repair.repository, deferred.run_id)["status"] in github.ACTIVE_RUN_STATUSES:
            continue
        if actions.do_claim_deferred_rerun(deferred):
            hub.rerun(repair.repository, deferred.run_id, deferred.failed_jobs_only)
            done += 1
    return done


AGENT_MERGE_TOOLS = (
    Tool("setAgentMergeEnabled", title="Configure Agent Merge",
         description=("Turn Agent Merge on, off or different for this chat's folder: keep its pull request green "
                      "and, if asked, merge it. Answers the configuration in force, including when it merges."),
         input_schema={"type": "object", "properties": {
             "enabled": {"type": "boolean"}, "addressReviews": {"type": "boolean"}, "fixCI": {"type": "boolean"},
             "resolveConflicts": {"type": "boolean"},
             "mergePullRequest": {"type": "string", "enum": ["always", "ifUnchanged", "never"]}},
             "required": ["enabled"], "additionalProperties": False},
         executor=set_agent_merge_enabled, defer_loading=True, effects=frozenset({"writes"})),
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
         executor=read_agent_merge_ci, defer_loading=True, annotations={"readOnlyHint": True},
         effects=frozenset({"reads", "network"})),
    Tool("replyToAgentMergeReviewThread", title="Reply to Agent Merge Review Thread",
         description="Reply to a review thread this Agent Merge turn was asked to address, then resolve it.",
         input_schema={"type": "object", "properties": {
             "threadId": {"type": "string"}, "body": {"type": "string", "minLength": 1}, "resolve": {"type": "boolean"}},
             "required": ["threadId", "body"]},
         executor=reply_to_agent_merge_review_thread, defer_loading=True,
         effects=frozenset({"writes", "network"})),
    Tool("rerunAgentMergeWorkflow", title="Rerun Agent Merge Workflow",
         description=("Rerun a workflow run of a failed required check of this Agent Merge turn; deferred while "
                      "its current attempt is still going."),
         input_schema={"type": "object", "properties": {
             "runId": {"type": "string"}, "failedJobsOnly": {"type": "boolean"}}, "required": ["runId"]},
         executor=rerun_agent_merge_workflow, defer_loading=True, effects=frozenset({"writes", "network"})),
)
