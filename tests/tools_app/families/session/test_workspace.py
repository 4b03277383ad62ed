"""set_workspace and isolate_session act when the calling turn ends: carried out on completion
(real `git worktree` on a temporary repository), dropped on failure."""
import os
import subprocess
from pathlib import Path

import pytest
from django.conf import settings

from kernel.refusals import Refused
from sandbox import identity
from sessions_app import actions
from sessions_app.models import ChatBackend, Session, TurnEffect
from tools_app.families.session.workspace import settle_turn_effects

from ....conftest import tenant_made
from .conftest import Place


@pytest.fixture
def repo(acme, workspace):
    folder = workspace / "project"
    folder.mkdir()
    for command in (["init", "-q", "-b", "main"], ["config", "user.email", "t@example.com"],
                    ["config", "user.name", "T"], ["commit", "-q", "--allow-empty", "-m", "start"]):
        subprocess.run(["git", "-C", str(folder), *command], check=True)
    return tenant_made(folder, acme.tenant)


def worktrees(folder):
    # The session's sandbox users made parts of the repository; the test reads it as root.
    listed = subprocess.run(["git", "-c", "safe.directory=*", "-C", str(folder), "worktree", "list", "--porcelain"],
                            capture_output=True,
                            text=True, check=True).stdout
    return [line.split(" ", 1)[1] for line in listed.splitlines() if line.startswith("worktree ")]


def test_set_workspace_is_carried_out_when_the_turn_completes(place, repo):
    place.call("set_workspace", workspaceFolder=str(repo), isolation=False)
    assert place.refresh().session.working_directories == []  # nothing yet
    actions.do_end_turn(place.turn.id, response_text="done")
    settle_turn_effects(place.turn.id)
    assert place.refresh().session.working_directories == [f"file://{repo}"]
    assert not TurnEffect.objects.exists()


def test_set_workspace_with_isolation_works_in_a_new_worktree(place, repo):
    place.call("set_workspace", workspaceFolder=f"file://{repo}", isolation=True)
    actions.do_end_turn(place.turn.id, response_text="done")
    settle_turn_effects(place.turn.id)
    [folder] = place.refresh().session.working_directories
    assert folder.startswith(f"file://{repo}.worktrees/") and folder[len("file://"):] in worktrees(repo)


@pytest.mark.skipif(os.geteuid() != 0, reason="an unprivileged sandbox user needs a host run as root")
def test_git_and_the_repositorys_own_hooks_run_in_the_sessions_sandbox(place, repo, monkeypatch):
    monkeypatch.setenv("AHP_CANARY_SECRET", "the host's own environment")
    hook = repo / ".git" / "hooks" / "post-checkout"
    hook.write_text(f"#!/bin/sh\n{{ id -u; ls {settings.VAR_DIR} 2>&1; env; }} > \"$PWD/hook-saw.txt\"; true\n")
    hook.chmod(0o755)
    place.call("set_workspace", workspaceFolder=str(repo), isolation=True)
    actions.do_end_turn(place.turn.id, response_text="done")
    settle_turn_effects(place.turn.id)
    [folder] = place.refresh().session.working_directories
    saw = (Path(folder[len("file://"):]) / "hook-saw.txt").read_text().splitlines()
    assert saw[0] == str(identity.existing_sandbox_user(str(place.session.id)))
    assert "AHP_CANARY_SECRET" not in "\n".join(saw) and not any(line.startswith("SECRET_KEY=") for line in saw)
    assert saw[1].endswith("No such file or directory")  # the host's var dir (its database) is not there


def test_set_workspace_is_dropped_when_the_turn_fails(place, repo):
    place.call("set_workspace", workspaceFolder=str(repo), isolation=True)
    actions.do_end_turn(place.turn.id, error="boom")
    settle_turn_effects(place.turn.id)
    assert place.refresh().session.working_directories == [] and worktrees(repo) == [str(repo)]
    assert not TurnEffect.objects.exists()


def test_isolate_session_moves_only_the_calling_chat_into_a_worktree(make_place, worktree_agent, repo):
    place = make_place(provider=worktree_agent, folders=[f"file://{repo}"])
    other = actions.do_create_chat(place.principal, place.session, "33333333-3333-3333-3333-333333333333", "peer")
    assert place.call("isolate_session").startswith("End this turn: when it completes, only this chat moves")
    actions.do_end_turn(place.turn.id, response_text="done")
    settle_turn_effects(place.turn.id)
    moved = ChatBackend.objects.get(chat=place.chat).working_directory
    assert moved.startswith(f"file://{repo}.worktrees/") and moved[len("file://"):] in worktrees(repo)
    assert not ChatBackend.objects.filter(chat=other).exists()
    assert Session.objects.get(pk=place.session.pk).working_directories == [f"file://{repo}", moved]


def test_isolate_session_needs_a_folder(make_place, worktree_agent):
    place = make_place(provider=worktree_agent)
    with pytest.raises(Refused) as refused:
        place.call("isolate_session")
    assert refused.value.sentence == "isolate_session needs a chat working in a local Git folder; this one has none."


def test_isolate_session_takes_no_input(make_place, worktree_agent, workspace):
    from tools_app.catalog.validation import ToolRefusal

    place = make_place(provider=worktree_agent, folders=[f"{workspace}/x"])
    with pytest.raises(ToolRefusal) as refused:
        place.call("isolate_session", workspace="/other")
    assert refused.value.sentence == (
        "Invalid input for isolate_session at /: Additional properties are not allowed ('workspace' was unexpected)")


def test_set_workspace_is_offered_up_front_only_to_a_session_that_started_without_a_folder(acme, workspace):
    from tools_app.catalog.loader import catalog_for_chat


    without = catalog_for_chat(Place(acme).chat)
    with_folder = catalog_for_chat(Place(acme, folders=[f"file://{workspace}/repo"]).chat)
    assert "set_workspace" in without.names and "set_workspace" not in without.deferred
    assert "set_workspace" in with_folder.deferred


def test_a_chat_made_on_another_backend_runs_its_turns_there(acme):
    from sessions_app.models import ChatBackend
    from tools_app.chat_provider import provider_of


    place = Place(acme)
    assert provider_of(place.chat) == "echo"
    ChatBackend.objects.create(chat=place.chat, provider="acp")
    assert provider_of(place.chat) == "acp"


def test_isolate_session_carries_the_sessions_worktree_include_files(make_place, worktree_agent, repo, workspace):
    (repo / ".env").write_text("TOKEN=local\n")
    (repo / "config").mkdir()
    (repo / "config" / "local.json").write_text("{}")
    (repo / "notes.txt").write_text("not asked for")
    outside = workspace / "elsewhere.txt"
    outside.write_text("outside the folder")
    (repo / "linked.env").symlink_to(outside)
    place = make_place(provider=worktree_agent, folders=[f"file://{repo}"])
    Session.objects.filter(pk=place.session.pk).update(
        config={"worktreeIncludeFiles": [".env", "config/*.json", "*.env", "../elsewhere.txt"]})
    place.call("isolate_session")
    actions.do_end_turn(place.turn.id, response_text="done")
    settle_turn_effects(place.turn.id)
    moved = Path(ChatBackend.objects.get(chat=place.chat).working_directory[len("file://"):])
    assert (moved / ".env").read_text() == "TOKEN=local\n" and (moved / "config" / "local.json").read_text() == "{}"
    assert not (moved / "notes.txt").exists() and not (moved / "linked.env").exists()
    assert not (moved.parent / "elsewhere.txt").exists()
