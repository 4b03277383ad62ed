"""The Agent Merge watcher: for each folder with Agent Merge on, its pull request is polled through
the GitHub adapter by a row-driven sweep. Failed required checks (fixCI), unresolved review
threads (addressReviews) and merge conflicts with the base (resolveConflicts) start a repair
turn asked to fix exactly those; while it runs nothing more is asked; once it ends the new head
is watched. Green, with nothing unresolved, it merges when mergePullRequest says so.

The repository and branch are read from the folder's `.git` files, never by running git: a
tenant's folder is data to the host, not a program."""
import re
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.utils import timezone

from grants.models import Principal
from kernel.refusals import Refused
from sandbox.workspaces import OutsideWorkspace, checked_folder, is_within, tenant_root
from sessions_app.models import Chat

from ..session.orchestration import launch_after_commit
from . import actions, github
from .models import PullRequestWatch

GITHUB_REMOTE = re.compile(r"github\.com[:/]+([\w.-]+/[\w.-]+?)(?:\.git)?/?$")
NO_GIT = "The folder is not a Git checkout of a GitHub repository (no github.com origin and branch in its .git)."
NO_PULL_REQUEST = "No open pull request from branch {branch} of {repository}."


class NotWatchable(Exception):
    pass


def read_inside(path, root):
    """The text of `path` when it is a regular file whose real path lies in `root`."""
    if path.is_symlink() or not path.is_file() or not is_within(Path(path.resolve()), root):
        raise NotWatchable(NO_GIT)
    return path.read_text(errors="replace")


def git_dirs(folder, root):
    """(the checkout's git dir, the repository's common git dir); a worktree's `.git` file names its
    git dir, and that names the common one."""
    dot_git = folder / ".git"
    if dot_git.is_symlink():
        raise NotWatchable(NO_GIT)
    if dot_git.is_dir():
        return dot_git, dot_git
    pointer = read_inside(dot_git, root).strip()
    if not pointer.startswith("gitdir:"):
        raise NotWatchable(NO_GIT)
    git_dir = (folder / pointer.removeprefix("gitdir:").strip()).resolve()
    if not is_within(git_dir, root):
        raise NotWatchable(NO_GIT)
    common = git_dir
    if (git_dir / "commondir").is_file():
        common = (git_dir / read_inside(git_dir / "commondir", root).strip()).resolve()
    if not is_within(common, root):
        raise NotWatchable(NO_GIT)
    return git_dir, common


def origin_and_branch(tenant, directory):
    """("owner/name", branch) of the folder's checkout, from its HEAD and its origin remote."""
    try:
        folder = checked_folder(tenant, directory)
        root = tenant_root(tenant)
    except OutsideWorkspace as outside:
        raise NotWatchable(str(outside)) from None
    git_dir, common = git_dirs(folder, root)
    head = read_inside(git_dir / "HEAD", root).strip()
    config = read_inside(common / "config", root)
    section = re.search(r'\[remote "origin"\]([^\[]*)', config)
    url = re.search(r"^\s*url\s*=\s*(\S+)", section.group(1), re.M) if section else None
    remote = GITHUB_REMOTE.search(url.group(1)) if url else None
    if not head.startswith("ref: refs/heads/") or remote is None:
        raise NotWatchable(NO_GIT)
    return remote.group(1), head.removeprefix("ref: refs/heads/")


def failed_required_checks(hub, repository, pull):
    """(the failed required checks as the repair tools read them, whether any still runs)."""
    required = hub.required_checks(repository, pull["base"])
    runs = [r for r in hub.check_runs(repository, pull["head_sha"]) if required is None or r["name"] in required]
    failed = {}
    for run in runs:
        if run["status"] == "completed" and run["conclusion"] not in ("success", "neutral", "skipped"):
            check = failed.setdefault((run["name"], run["runId"]), {"name": run["name"], "runId": run["runId"],
                                                                    "jobIds": []})
            check["jobIds"].append(run["jobId"])
    pending = any(run["status"] != "completed" for run in runs)
    missing = required is not None and bool(required - {run["name"] for run in runs})
    return list(failed.values()), pending or missing


def repair_text(repository, pull_number, checks, threads, conflicts_with):
    """What the repair turn is asked: exactly these, nothing else."""
    lines = [f"Agent Merge: pull request {repository}#{pull_number} needs these fixed, and nothing else."]
    if conflicts_with:
        lines.append(f"- It conflicts with {conflicts_with}: merge {conflicts_with} into the branch, resolve the "
                     f"conflicts, push.")
    for check in checks:
        lines.append(f"- The required check {check['name']} failed (workflow run {check['runId']}, jobs "
                     f"{', '.join(check['jobIds'])}): read its log with readAgentMergeCI, fix the cause, push.")
    for thread in threads:
        where = f" on {thread['path']}" if thread.get("path") else ""
        lines.append(f"- Review thread {thread['threadId']}{where} is unresolved: \"{thread['body']}\". Address it "
                     f"and answer with replyToAgentMergeReviewThread.")
    lines.append("End the turn when these are done; Agent Merge watches the pull request again after it.")
    return "\n".join(lines)


def merges_now(watch):
    config = watch.config
    return config.merge_pull_request == "always" or (config.merge_pull_request == "ifUnchanged" and not watch.repaired)


def poll(watch):
    """One look at the watched pull request; acts on what it finds."""
    config = watch.config
    session = config.session
    if watch.repair is not None and watch.repair.turn.state == "active":
        return "repairing"
    if watch.state == "repairing":  # its repair turn ended: watch the new head
        actions.do_note_watch(watch, state="watching")
    try:
        repository, branch = origin_and_branch(session.tenant, config.folder or (session.working_directories or [""])[0])
    except NotWatchable as cannot:
        actions.do_note_watch(watch, last_problem=str(cannot))
        return "cannot"
    hub = github.adapter()
    number = watch.pull_number if watch.repository == repository and watch.pull_number else (
        hub.open_pull_request_for(repository, branch))
    if number is None:
        actions.do_note_watch(watch, repository=repository,
                              last_problem=NO_PULL_REQUEST.format(branch=branch, repository=repository))
        return "no pull request"
    actions.do_note_watch(watch, repository=repository, pull_number=number, last_problem="")
    watch.repository, watch.pull_number = repository, number
    pull = hub.pull_request(repository, number)
    if pull["merged"] or pull["state"] != "open":
        actions.do_note_watch(watch, state="merged" if pull["merged"] else "closed")
        return "ended"
    failed, running = failed_required_checks(hub, repository, pull)
    checks = failed if config.fix_ci else []
    threads = hub.unresolved_review_threads(repository, number) if config.address_reviews else []
    conflicts_with = pull["base"] if config.resolve_conflicts and pull["conflicts"] else ""
    if checks or threads or conflicts_with:
        return start_repair(watch, pull, checks, threads, conflicts_with)
    if failed or running:
        return "waiting for checks"
    if pull["conflicts"]:
        return "not mergeable"
    if merges_now(watch):
        hub.merge(repository, number, pull["head_sha"])
        actions.do_note_watch(watch, state="merged")
        return "merged"
    return "green"


def start_repair(watch, pull, checks, threads, conflicts_with):
    """A repair turn in the session's main chat, for its owner; a busy chat is tried at the next poll.
    The same problems on the same head are asked once: a repair that pushed nothing is not repeated."""
    last = watch.repair
    if last is not None and last.head_sha == pull["head_sha"] and last.failed_checks == checks and (
            last.review_threads == threads and last.conflicts_with == conflicts_with):
        return "already asked"
    session = watch.config.session
    chat = Chat.objects.filter(session=session, is_default=True).first()
    principal = Principal.for_person(session.tenant, session.owner)
    text = repair_text(watch.repository, pull["number"], checks, threads, conflicts_with)
    try:
        turn = actions.do_start_watch_repair(watch, principal, chat, text, pull["number"], pull["head_sha"],
                                             checks, threads, conflicts_with)
    except Refused as busy:
        actions.do_note_watch(watch, last_problem=busy.sentence)
        return "busy"
    launch_after_commit(turn)
    return "repairing"


def sweep_watches(now=None):
    """Poll every due watch this caller claims; answers {watch id: what the poll did}."""
    now = now or timezone.now()
    next_due = now + timedelta(seconds=settings.AHP_AGENT_MERGE_POLL_SECONDS)
    done = {}
    due = PullRequestWatch.objects.filter(state__in=PullRequestWatch.POLLED, due__lte=now).select_related(
        "config__session__tenant", "config__session__owner", "repair__turn")
    for watch in due:
        if not actions.do_claim_watch(watch, now, next_due):
            continue
        try:
            done[watch.pk] = poll(watch)
        except github.GitHubError as failed:
            actions.do_note_watch(watch, last_problem=str(failed))
            done[watch.pk] = "github failed"
    return done
