"""Agent Merge: configuration per folder, and three repair tools that answer only inside a repair
turn Agent Merge started and only for what it was asked to fix. GitHub is a fake of the adapter."""
import asyncio
import json

import pytest

from sessions_app import actions as session_actions
from tools_app.families.agent_merge import github
from tools_app.families.agent_merge.actions import PENDING_REVIEW, do_set_agent_merge, do_start_repair_turn
from tools_app.families.agent_merge.tools import NO_FOLDER, perform_deferred_reruns
from tools_app.models import AgentMergeConfig, DeferredRerun, PullRequestWatch

from ...conftest import tenant_made
from .helpers import Desk

LOG = "\n".join(f"step {i}" for i in range(1, 251)) + "\nError: test_login failed\nexit 1"
REFUSAL_TAIL = ("End this turn instead of reaching for another GitHub tool or the GitHub CLI; Agent Merge starts a "
                "new repair turn when there is something it may fix.")


class FakeGitHub:
    """The adapter's interface, recording what was asked of GitHub."""

    def __init__(self):
        self.calls = []
        self.run_status = "completed"
        self.pending_review = False

    def job_log(self, repository, job_id):
        self.calls.append(("job_log", repository, job_id))
        return LOG

    def workflow_run(self, repository, run_id):
        self.calls.append(("workflow_run", run_id))
        return {"status": self.run_status, "conclusion": None, "run_attempt": 1}

    def rerun(self, repository, run_id, failed_jobs_only=True):
        self.calls.append(("rerun", run_id, failed_jobs_only))

    def reply_to_review_comment(self, repository, pull_number, comment_id, body):
        self.calls.append(("reply", pull_number, comment_id, body))
        return {"id": 99, "pending": self.pending_review}

    def resolve_thread(self, thread_node_id):
        self.calls.append(("resolve", thread_node_id))


@pytest.fixture
def hub(monkeypatch):
    fake = FakeGitHub()
    monkeypatch.setattr(github, "adapter_factory", lambda: fake)
    return fake


def repair(desk, people):
    return do_start_repair_turn(
        people.principal("member"), desk.chat, "Fix the failing checks", "acme/app", 7,
        failed_checks=[{"name": "tests", "runId": "501", "jobIds": ["9001"]}],
        review_threads=[{"threadId": "PRRT_1", "commentId": 77}])


def call_in_repair(desk, people, tool, arguments):
    """Run one tool call inside a repair turn, as the agent would answer it."""
    import asyncio

    from tools_app.runtime.toolbox import ChatToolbox

    turn = repair(desk, people)
    from sessions_app.models import Turn

    turn = Turn.objects.select_related("chat__session__tenant", "sender").get(pk=turn.pk)
    return asyncio.run(ChatToolbox(turn).call(tool, arguments))


@pytest.fixture
def project(acme, workspace):
    (workspace / "app").mkdir()
    return tenant_made(workspace / "app", acme.tenant)


def test_set_agent_merge_enabled_answers_the_configuration_in_force(acme, host, hub, project):
    with Desk(host, acme) as bare:
        assert bare.call("setAgentMergeEnabled", {"enabled": True}) == NO_FOLDER
        assert not AgentMergeConfig.objects.filter(session=bare.session).exists()
    with Desk(host, acme, folders=[project.as_uri()]) as desk:
        on = json.loads(desk.call("setAgentMergeEnabled", {"enabled": True, "mergePullRequest": "ifUnchanged"}))
        assert on == {"folder": project.as_uri(), "enabled": True, "addressReviews": True, "fixCI": True, "resolveConflicts": True,
                      "mergePullRequest": "ifUnchanged",
                      "merges": "merges when ready, unless Agent Merge itself changed the pull request"}
        changed = json.loads(desk.call("setAgentMergeEnabled", {"enabled": True, "fixCI": False}))
        assert (changed["fixCI"], changed["mergePullRequest"]) == (False, "ifUnchanged")
        off = json.loads(desk.call("setAgentMergeEnabled", {"enabled": False}))
        assert (off["enabled"], off["merges"]) == (False, "off")
        assert AgentMergeConfig.objects.get(session=desk.session).enabled is False


@pytest.mark.django_db(transaction=True)
def test_set_agent_merge_enabled_asks_no_grant_of_a_turn_nobody_sent(acme, hub, project):
    """A wakeup's or Agent Merge's own turn holds only session:read, and still configures it."""
    import asyncio

    from sessions_app.models import Turn
    from tools_app.runtime.toolbox import ChatToolbox

    from .session.conftest import Place

    place = Place(acme, folders=[project.as_uri()])
    Turn.objects.filter(pk=place.turn.pk).update(sender=None)
    turn = Turn.objects.select_related("chat__session__tenant", "sender").get(pk=place.turn.pk)
    answer = json.loads(asyncio.run(ChatToolbox(turn).call("setAgentMergeEnabled", {"enabled": True})))
    assert answer["enabled"] is True
    assert AgentMergeConfig.objects.get(session=place.session).enabled is True


@pytest.mark.parametrize("tool, arguments", [
    ("readAgentMergeCI", {}), ("replyToAgentMergeReviewThread", {"threadId": "PRRT_1", "body": "Done"}),
    ("rerunAgentMergeWorkflow", {"runId": "501"})])
def test_repair_tools_refuse_outside_a_repair_turn(acme, host, hub, tool, arguments):
    with Desk(host, acme) as desk:
        assert desk.call(tool, arguments) == (
            f"{tool} answers only inside a repair turn Agent Merge started. {REFUSAL_TAIL}")
        assert hub.calls == []


@pytest.mark.django_db(transaction=True)
def test_read_ci_pages_a_failed_jobs_log_behind_an_evidence_id(acme, hub):
    desk = BareDesk(acme)
    summary = call_in_repair(desk, acme, "readAgentMergeCI", {})
    assert summary.startswith("Check tests job 9001: evidence ev-") and "252: exit 1" in summary
    evidence = summary.split("evidence ")[1].split(",")[0]
    turn_toolbox = desk.toolbox_of_last_turn()
    assert desk.run(turn_toolbox, "readAgentMergeCI", {"mode": "tail", "evidenceId": evidence, "lineCount": 2}) == (
        "251: Error: test_login failed\n252: exit 1\n(complete: this is the end of the log)")
    assert desk.run(turn_toolbox, "readAgentMergeCI", {"mode": "range", "evidenceId": evidence, "startLine": 3,
                                                       "endLine": 4}) == "3: step 3\n4: step 4"
    assert desk.run(turn_toolbox, "readAgentMergeCI", {"mode": "search", "evidenceId": evidence,
                                                       "query": "ERROR: TEST", "contextLines": 1}) == (
        "250: step 250\n251: Error: test_login failed\n252: exit 1")
    assert desk.run(turn_toolbox, "readAgentMergeCI", {"jobId": "1234"}) == (
        f"Job 1234 is not among what this Agent Merge turn was asked to fix. {REFUSAL_TAIL}")
    assert [c for c in hub.calls if c[0] == "job_log"] == [("job_log", "acme/app", "9001")]


@pytest.mark.django_db(transaction=True)
def test_a_review_reply_is_published_before_its_thread_is_resolved(acme, hub):
    desk = BareDesk(acme)
    assert call_in_repair(desk, acme, "replyToAgentMergeReviewThread", {"threadId": "PRRT_1", "body": "Fixed."}) == (
        "Replied to review thread PRRT_1 and resolved it.")
    assert hub.calls == [("reply", 7, 77, "Fixed."), ("resolve", "PRRT_1")]
    toolbox = desk.toolbox_of_last_turn()
    assert desk.run(toolbox, "replyToAgentMergeReviewThread", {"threadId": "PRRT_9", "body": "x"}) == (
        f"Review thread PRRT_9 is not among what this Agent Merge turn was asked to fix. {REFUSAL_TAIL}")


@pytest.mark.django_db(transaction=True)
def test_a_reply_landing_in_the_pending_review_answers_pending_and_resolves_nothing(acme, hub):
    hub.pending_review = True
    desk = BareDesk(acme)
    watch = do_set_agent_merge(desk.session, "file:///work/app", True, {}).watch
    started = repair(desk, acme)
    PullRequestWatch.objects.filter(pk=watch.pk).update(state="repairing", repair=started.agent_merge_repair)
    answer = asyncio.run(desk.toolbox_of_last_turn().call("replyToAgentMergeReviewThread",
                                                          {"threadId": "PRRT_1", "body": "Fixed."}))
    assert answer.startswith("pending: ")
    assert ("resolve", "PRRT_1") not in hub.calls
    # The watch stops: only the person can submit that review.
    stopped = PullRequestWatch.objects.get(pk=watch.pk)
    assert (stopped.state, stopped.last_problem) == ("off", PENDING_REVIEW)


def answering(people, approved):
    """A thread that answers the first question a tool asks the person, as their client would."""
    import threading
    import time

    from tools_app.families.comments.actions import do_answer_question
    from tools_app.families.comments.models import Question

    def answer():
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            question = Question.objects.select_related("chat").filter(approved__isnull=True).first()
            if question is not None:
                do_answer_question(people.principal("member"), question.chat, question.turn_id,
                                   question.tool_call_id, approved)
                return
            time.sleep(0.05)

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    return thread


@pytest.mark.django_db(transaction=True)
def test_rerun_asks_once_and_defers_while_the_attempt_is_still_going(acme, hub):
    hub.run_status = "in_progress"
    desk = BareDesk(acme)
    answering(acme, True)
    assert call_in_repair(desk, acme, "rerunAgentMergeWorkflow", {"runId": "501"}) == (
        "deferred: run 501's current attempt is still in_progress; Agent Merge reruns it when it finishes. "
        "Do not poll or ask again.")
    toolbox = desk.toolbox_of_last_turn()
    assert desk.run(toolbox, "rerunAgentMergeWorkflow", {"runId": "501"}) == (
        "deferred: the rerun of run 501 is already waiting for its current attempt to finish.")
    assert [c for c in hub.calls if c[0] == "workflow_run"] == [("workflow_run", "501")]
    assert perform_deferred_reruns() == 0
    hub.run_status = "completed"
    assert perform_deferred_reruns() == 1 and perform_deferred_reruns() == 0
    assert [c for c in hub.calls if c[0] == "rerun"] == [("rerun", "501", True)]
    assert DeferredRerun.objects.get().done is True
    assert desk.run(toolbox, "rerunAgentMergeWorkflow", {"runId": "777"}) == (
        f"Workflow run 777 is not among what this Agent Merge turn was asked to fix. {REFUSAL_TAIL}")


@pytest.mark.django_db(transaction=True)
def test_rerun_of_a_finished_run_asks_github_at_once(acme, hub):
    desk = BareDesk(acme)
    answering(acme, True)
    assert call_in_repair(desk, acme, "rerunAgentMergeWorkflow", {"runId": "501", "failedJobsOnly": False}) == (
        "Asked GitHub to rerun run 501.")
    assert hub.calls[-1] == ("rerun", "501", False)
    from tools_app.families.comments.models import Question

    assert Question.objects.get().title == "Rerun workflow run 501 of acme/app#7?"


@pytest.mark.django_db(transaction=True)
def test_a_rerun_the_person_declines_is_not_asked_of_github(acme, hub):
    desk = BareDesk(acme)
    answering(acme, False)
    assert call_in_repair(desk, acme, "rerunAgentMergeWorkflow", {"runId": "501"}) == (
        "The person declined to rerun the failed jobs of workflow run 501.")
    assert not [c for c in hub.calls if c[0] in ("rerun", "workflow_run")]


class BareDesk:
    """A session and chat without a socket, for driving a repair turn's toolbox directly."""

    def __init__(self, people):
        import uuid

        self.session = session_actions.do_create_session(people.principal("member"), uuid.uuid4())
        self.chat = self.session.chats.get()

    def toolbox_of_last_turn(self):
        from sessions_app.models import Turn
        from tools_app.runtime.toolbox import ChatToolbox

        turn = Turn.objects.select_related("chat__session__tenant", "sender").filter(chat=self.chat).latest("started")
        return ChatToolbox(turn)

    def run(self, toolbox, tool, arguments):
        import asyncio

        return asyncio.run(toolbox.call(tool, arguments))
