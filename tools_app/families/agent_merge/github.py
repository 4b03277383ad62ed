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

    def _get(self, path):
        return self._send("GET", path)

    def _post(self, path, **kwargs):
        return self._send("POST", path, **kwargs)

    def _send(self, method, path, **kwargs):
        try:
            return self._check(self.client.request(method, path, **kwargs))
        except OutboundRefused as refused:
            raise GitHubError(refused.sentence) from None

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
