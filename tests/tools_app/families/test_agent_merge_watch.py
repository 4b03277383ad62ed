"""The Agent Merge watcher against a local HTTP server speaking the GitHub API subset the adapter
uses: failed required checks and unresolved review threads start a repair turn asked to fix
exactly those, nothing more is asked while it runs, and a green pull request is merged when the
configuration says so."""
import json
import threading
import uuid
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest
from django.utils import timezone

from sessions_app import actions as session_actions
from sessions_app.models import Turn
from tools_app.families.agent_merge import github
from tools_app.families.agent_merge.actions import do_set_agent_merge
from tools_app.families.agent_merge.watch import NO_GIT, sweep_watches
from tools_app.models import PullRequestWatch

HEAD = "a1" * 20


class FakeGitHubState:
    def __init__(self):
        self.pull = {"number": 7, "state": "open", "merged": False, "head": {"sha": HEAD}, "base": {"ref": "main"}}
        self.required = ["tests"]
        self.check_runs = [
            {"id": 9001, "name": "tests", "status": "completed", "conclusion": "failure",
             "details_url": "https://github.com/acme/app/actions/runs/501/job/9001"},
            {"id": 9002, "name": "lint", "status": "completed", "conclusion": "failure",  # not required
             "details_url": "https://github.com/acme/app/actions/runs/502/job/9002"}]
        self.threads = [{"id": "PRRT_1", "isResolved": False,
                         "comments": {"nodes": [{"databaseId": 77, "path": "app.py", "body": "Name this better"}]}},
                        {"id": "PRRT_2", "isResolved": True, "comments": {"nodes": [{"databaseId": 78}]}}]
        self.requests = []


@pytest.fixture
def github_server(monkeypatch, allow_loopback):
    state = FakeGitHubState()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def answer(self, body, status=200):
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            url = urlsplit(self.path)
            state.requests.append(("GET", url.path))
            if url.path == "/repos/acme/app/pulls":
                query = parse_qs(url.query)
                found = query.get("head") == ["acme:feature"] and query.get("state") == ["open"]
                return self.answer([{"number": 7}] if found else [])
            if url.path == "/repos/acme/app/pulls/7":
                return self.answer(state.pull)
            if url.path == "/repos/acme/app/branches/main/protection/required_status_checks":
                return self.answer({"contexts": state.required})
            if url.path == f"/repos/acme/app/commits/{state.pull['head']['sha']}/check-runs":
                return self.answer({"check_runs": state.check_runs})
            self.answer({"message": "Not Found"}, 404)

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            state.requests.append(("POST", self.path))
            assert self.path == "/graphql" and body["variables"] == {"owner": "acme", "name": "app", "number": 7}
            self.answer({"data": {"repository": {"pullRequest": {"reviewThreads": {"nodes": state.threads}}}}})

        def do_PUT(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            state.requests.append(("PUT", self.path, body))
            state.pull["merged"] = True
            self.answer({"merged": True})

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base_url = f"http://127.0.0.1:{server.server_address[1]}"
    monkeypatch.setattr(github, "adapter_factory", lambda: github.GitHub("token", base_url=base_url))
    yield state
    server.shutdown()


def checkout(root, name="app", remote="git@github.com:acme/app.git", branch="feature"):
    folder = root / name
    (folder / ".git").mkdir(parents=True)
    (folder / ".git" / "HEAD").write_text(f"ref: refs/heads/{branch}\n")
    (folder / ".git" / "config").write_text(f'[core]\n\tbare = false\n[remote "origin"]\n\turl = {remote}\n')
    return folder


def session_in(people, folder):
    return session_actions.do_create_session(people.principal("member"), uuid.uuid4(), "echo", [f"file://{folder}"])


def watching(session, **options):
    config = do_set_agent_merge(session, f"file://{session.working_directories[0].removeprefix('file://')}", True,
                                options)
    return config.watch


def sweep_later(minutes=5):
    return sweep_watches(timezone.now() + timedelta(minutes=minutes))


def test_failed_required_checks_and_open_threads_start_one_repair_turn_asked_exactly_those(
        acme, workspace, github_server):
    session = session_in(acme, checkout(workspace))
    watch = watching(session)
    assert sweep_watches() == {watch.pk: "repairing"}
    turn = Turn.objects.get(chat__session=session, origin_kind="automation")
    assert turn.sender == acme.member
    assert turn.text == (
        "Agent Merge: pull request acme/app#7 needs these fixed, and nothing else.\n"
        "- The required check tests failed (workflow run 501, jobs 9001): read its log with readAgentMergeCI, "
        "fix the cause, push.\n"
        '- Review thread PRRT_1 on app.py is unresolved: "Name this better". Address it and answer with '
        "replyToAgentMergeReviewThread.\n"
        "End the turn when these are done; Agent Merge watches the pull request again after it.")
    repair = turn.agent_merge_repair
    assert (repair.repository, repair.pull_number, repair.head_sha) == ("acme/app", 7, HEAD)
    assert repair.failed_checks == [{"name": "tests", "runId": "501", "jobIds": ["9001"]}]  # lint is not required
    assert repair.review_threads == [{"threadId": "PRRT_1", "commentId": 77, "path": "app.py",
                                      "body": "Name this better"}]

    asked = len(github_server.requests)
    assert sweep_later() == {watch.pk: "repairing"}  # the turn still runs: GitHub is not asked
    assert len(github_server.requests) == asked
    assert Turn.objects.filter(chat__session=session).count() == 1

    session_actions.do_end_turn(turn.id, "pushed a fix")
    github_server.pull["head"]["sha"] = "b2" * 20  # the fix
    github_server.check_runs = [{**run, "conclusion": "success"} for run in github_server.check_runs]
    github_server.threads = []
    assert sweep_later(10) == {watch.pk: "green"}  # ended: watching again; mergePullRequest is never
    assert PullRequestWatch.objects.get(pk=watch.pk).state == "watching"
    assert not [r for r in github_server.requests if r[0] == "PUT"]


def test_a_green_pull_request_merges_when_configured_and_the_watch_ends(acme, workspace, github_server):
    session = session_in(acme, checkout(workspace))
    github_server.check_runs = [{**run, "conclusion": "success"} for run in github_server.check_runs]
    github_server.threads = []
    watch = watching(session, mergePullRequest="ifUnchanged")
    assert sweep_watches() == {watch.pk: "merged"}
    assert github_server.requests[-1] == ("PUT", "/repos/acme/app/pulls/7/merge", {"sha": HEAD})
    assert PullRequestWatch.objects.get(pk=watch.pk).state == "merged"
    assert sweep_later() == {}


def test_it_waits_while_a_required_check_still_runs(acme, workspace, github_server):
    session = session_in(acme, checkout(workspace))
    github_server.check_runs = [{**github_server.check_runs[0], "status": "in_progress", "conclusion": None}]
    github_server.threads = []
    watch = watching(session, mergePullRequest="always")
    assert sweep_watches() == {watch.pk: "waiting for checks"}
    assert not Turn.objects.filter(chat__session=session).exists()


def test_a_due_watch_is_polled_once_however_many_sweeps_claim_it(acme, workspace, github_server):
    watch = watching(session_in(acme, checkout(workspace)))
    stale = PullRequestWatch.objects.get(pk=watch.pk)
    assert sweep_watches() == {watch.pk: "repairing"}
    from tools_app.families.agent_merge.actions import do_claim_watch

    assert do_claim_watch(stale, timezone.now(), timezone.now()) is False  # another sweep moved its due time


def test_turning_agent_merge_off_stops_the_watch(acme, workspace, github_server):
    session = session_in(acme, checkout(workspace))
    watching(session)
    do_set_agent_merge(session, f"file://{workspace / 'app'}", False, {})
    assert sweep_watches() == {}
    assert github_server.requests == []


def test_a_folder_that_is_no_github_checkout_is_said_so(acme, workspace, github_server):
    folder = checkout(workspace, remote="https://gitlab.com/acme/app.git")
    watch = watching(session_in(acme, folder))
    assert sweep_watches() == {watch.pk: "cannot"}
    assert PullRequestWatch.objects.get(pk=watch.pk).last_problem == NO_GIT


def test_a_git_config_symlinked_out_of_the_workspace_is_not_read(acme, workspace, github_server, tmp_path):
    folder = checkout(workspace)
    outside = tmp_path / "config"
    outside.write_text('[remote "origin"]\n\turl = git@github.com:acme/app.git\n')
    (folder / ".git" / "config").unlink()
    (folder / ".git" / "config").symlink_to(outside)
    watch = watching(session_in(acme, folder))
    assert sweep_watches() == {watch.pk: "cannot"}
    assert github_server.requests == []


def test_a_conflict_with_the_base_is_asked_to_be_resolved_only_with_resolve_conflicts(acme, workspace, github_server):
    github_server.pull["mergeable_state"] = "dirty"
    github_server.check_runs = [{**run, "conclusion": "success"} for run in github_server.check_runs]
    github_server.threads = []
    session = session_in(acme, checkout(workspace))
    watch = watching(session, resolveConflicts=False, mergePullRequest="always")
    assert sweep_watches() == {watch.pk: "not mergeable"}  # never merged while it conflicts
    watching(session, resolveConflicts=True)
    assert sweep_watches() == {watch.pk: "repairing"}
    turn = Turn.objects.get(chat__session=session, origin_kind="automation")
    assert "- It conflicts with main: merge main into the branch, resolve the conflicts, push." in turn.text
    assert turn.agent_merge_repair.conflicts_with == "main"
