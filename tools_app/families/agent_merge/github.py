"""The one way Agent Merge reaches GitHub: a small adapter over GitHub's REST API (httpx).
Tests use a fake with the same methods. Resolving a review thread exists only in GitHub's
GraphQL API, which the same client posts to. Every request, each redirect hop included, goes
only where sandbox.outbound allows."""
import os

import httpx

from sandbox.outbound import OutboundRefused, OutboundTransport

API = "https://api.github.com"
ACTIVE_RUN_STATUSES = ("queued", "in_progress", "waiting", "requested", "pending")


class GitHubError(Exception):
    pass


class GitHub:
    def __init__(self, token, base_url=API, timeout=30):
        self.client = httpx.Client(base_url=base_url, timeout=timeout, follow_redirects=True,
                                   transport=OutboundTransport(), headers={
            "Authorization": f"Bearer {token}", "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": "2022-11-28"})

    def _get(self, path, **kwargs):
        return self._send("GET", path, **kwargs)

    def _post(self, path, **kwargs):
        return self._send("POST", path, **kwargs)

    def _send(self, method, path, missing_ok=False, **kwargs):
        """The response; with `missing_ok`, None for a 404."""
        try:
            response = self.client.request(method, path, **kwargs)
        except OutboundRefused as refused:
            raise GitHubError(refused.sentence) from None
        if missing_ok and response.status_code == 404:
            return None
        return self._check(response)

    def _check(self, response):
        if response.status_code >= 400:
            raise GitHubError(f"GitHub answered {response.status_code} for {response.request.method} "
                              f"{response.request.url.path}")
        return response

    def job_log(self, repository, job_id):
        return self._get(f"/repos/{repository}/actions/jobs/{job_id}/logs").text

    def workflow_run(self, repository, run_id):
        """{status, conclusion, run_attempt} of a run's current attempt."""
        run = self._get(f"/repos/{repository}/actions/runs/{run_id}").json()
        return {"status": run.get("status"), "conclusion": run.get("conclusion"), "run_attempt": run.get("run_attempt")}

    def rerun(self, repository, run_id, failed_jobs_only=True):
        path = "rerun-failed-jobs" if failed_jobs_only else "rerun"
        self._post(f"/repos/{repository}/actions/runs/{run_id}/{path}")

    def reply_to_review_comment(self, repository, pull_number, comment_id, body):
        """Reply under a thread's first comment; answers {id, pending}: pending when the reply
        landed in the person's own pending review instead of being published."""
        reply = self._post(
            f"/repos/{repository}/pulls/{pull_number}/comments/{comment_id}/replies", json={"body": body}).json()
        review_id = reply.get("pull_request_review_id")
        pending = False
        if review_id:
            review = self._get(f"/repos/{repository}/pulls/{pull_number}/reviews/{review_id}").json()
            pending = review.get("state") == "PENDING"
        return {"id": reply.get("id"), "pending": pending}

    def _put(self, path, **kwargs):
        return self._send("PUT", path, **kwargs)

    def pull_request(self, repository, pull_number):
        """{number, state, merged, head_sha, base, conflicts} of one pull request; `conflicts` when
        GitHub says it cannot be merged cleanly into its base (mergeable_state "dirty")."""
        pull = self._get(f"/repos/{repository}/pulls/{pull_number}").json()
        return {"number": pull["number"], "state": pull.get("state"), "merged": bool(pull.get("merged")),
                "head_sha": pull["head"]["sha"], "base": pull["base"]["ref"],
                "conflicts": pull.get("mergeable_state") == "dirty"}

    def open_pull_request_for(self, repository, branch):
        """The number of the open pull request from `branch`, or None."""
        owner = repository.split("/")[0]
        pulls = self._get(f"/repos/{repository}/pulls", params={"head": f"{owner}:{branch}", "state": "open"}).json()
        return pulls[0]["number"] if pulls else None

    def required_checks(self, repository, base):
        """The check names branch protection requires on `base`; None when it requires none by name
        (no protection): then every check counts."""
        response = self._get(f"/repos/{repository}/branches/{base}/protection/required_status_checks",
                             missing_ok=True)
        return None if response is None else set(response.json().get("contexts") or ())

    def check_runs(self, repository, sha):
        """[{name, status, conclusion, runId, jobId}] of the commit's check runs; an Actions check run
        is a job, its details URL names its workflow run."""
        runs = self._get(f"/repos/{repository}/commits/{sha}/check-runs", params={"per_page": 100}).json()
        found = []
        for run in runs.get("check_runs", ()):
            url = run.get("details_url") or ""
            run_id = url.split("/actions/runs/")[1].split("/")[0] if "/actions/runs/" in url else ""
            found.append({"name": run["name"], "status": run.get("status"), "conclusion": run.get("conclusion"),
                          "runId": run_id, "jobId": str(run["id"])})
        return found

    def unresolved_review_threads(self, repository, pull_number):
        """[{threadId, commentId, path, body}] of the pull request's unresolved review threads."""
        owner, name = repository.split("/")
        query = ("query($owner: String!, $name: String!, $number: Int!) { repository(owner: $owner, name: $name) { "
                 "pullRequest(number: $number) { reviewThreads(first: 100) { nodes { id isResolved "
                 "comments(first: 1) { nodes { databaseId path body } } } } } } }")
        answer = self._post("/graphql", json={"query": query, "variables": {
            "owner": owner, "name": name, "number": pull_number}}).json()
        if answer.get("errors"):
            raise GitHubError(f"GitHub refused to list the review threads of {repository}#{pull_number}")
        threads = answer["data"]["repository"]["pullRequest"]["reviewThreads"]["nodes"]
        found = []
        for thread in threads:
            if thread["isResolved"]:
                continue
            first = (thread["comments"]["nodes"] or [{}])[0]
            found.append({"threadId": thread["id"], "commentId": first.get("databaseId"), "path": first.get("path", ""),
                          "body": first.get("body", "")})
        return found

    def merge(self, repository, pull_number, sha):
        """Merge the pull request if its head is still `sha`."""
        self._put(f"/repos/{repository}/pulls/{pull_number}/merge", json={"sha": sha})

    def resolve_thread(self, thread_node_id):
        query = ("mutation($id: ID!) { resolveReviewThread(input: {threadId: $id}) { thread { isResolved } } }")
        answer = self._post("/graphql", json={"query": query, "variables": {"id": thread_node_id}})
        if answer.json().get("errors"):
            raise GitHubError(f"GitHub refused to resolve thread {thread_node_id}")


def default_adapter():
    token = os.environ.get("AHP_GITHUB_TOKEN", "")
    if not token:
        raise GitHubError("Agent Merge has no GitHub token (AHP_GITHUB_TOKEN).")
    return GitHub(token)


# Replaced in tests by a fake of the same interface.
adapter_factory = default_adapter


def adapter():
    return adapter_factory()
