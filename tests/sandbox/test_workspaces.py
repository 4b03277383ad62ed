"""Working directories live in the tenant's workspace root: tenant B's sessions cannot point at
tenant A's repository (or /etc) by any spelling, at createSession, create_session,
set_workspace and isolate_session, and isolation cuts worktrees only inside the root."""
import json
import subprocess
import uuid

import pytest
from django.test import Client

from grants.models import Tenant
from kernel.refusals import Refused
from sessions_app import actions
from sessions_app.models import Session
from tools_app.families.session.workspace import settle_turn_effects

from ..ahp.protocol.harness import AhpClient, RpcFailed, default_chat
from ..tools_app.families.session.conftest import Place


def outside(path):
    return f"{path} is outside this tenant's workspace root."


def git_repo(folder):
    folder.mkdir(parents=True)
    for command in (["init", "-q", "-b", "main"], ["-c", "user.email=t@e", "-c", "user.name=T", "commit", "-q",
                                                   "--allow-empty", "-m", "start"]):
        subprocess.run(["git", "-C", str(folder), *command], check=True)
    return folder


def worktrees(folder):
    listed = subprocess.run(["git", "-C", str(folder), "worktree", "list", "--porcelain"], capture_output=True,
                            text=True, check=True).stdout
    return [line.split(" ", 1)[1] for line in listed.splitlines() if line.startswith("worktree ")]


@pytest.fixture
def roots(acme, globex, workspace_root):
    """acme's repository in acme's root, and globex's (tenant B's) root with a symlink in it that
    points at acme's repository."""
    acme_repo = git_repo(workspace_root / "acme" / "repo")
    globex_root = workspace_root / "globex"
    git_repo(globex_root / "own")
    (globex_root / "link").symlink_to(acme_repo)
    return acme_repo, globex_root


def escapes(acme_repo, globex_root):
    """Every spelling tenant B might use for tenant A's repository or a host folder, and the
    path its refusal names."""
    return [
        (str(acme_repo), str(acme_repo)),
        (f"file://{acme_repo}", str(acme_repo)),
        ("file:///etc", "/etc"),
        (f"file://{globex_root}/../acme/repo", f"{globex_root}/../acme/repo"),
        (f"file://{globex_root}/%2e%2e/acme/repo", f"{globex_root}/../acme/repo"),
        (f"{globex_root}/link", f"{globex_root}/link"),
        (f"{globex_root}/link/sub", f"{globex_root}/link/sub"),
        ("relative/folder", "relative/folder"),
        ("vscode-remote://elsewhere/etc", "vscode-remote://elsewhere/etc"),
    ]


def test_create_session_on_the_socket_refuses_every_folder_outside_the_root(globex, host, roots):
    acme_repo, globex_root = roots
    with AhpClient(host.port, globex.tokens["member"]) as gus:
        for given, shown in escapes(acme_repo, globex_root):
            with pytest.raises(RpcFailed) as refused:
                gus.create_session(workingDirectories=[f"file://{globex_root}/own", given])
            assert (refused.value.code, refused.value.message) == (-32602, outside(shown)), given
        assert not Session.objects.filter(tenant=globex.tenant).exists()
        made = gus.create_session(workingDirectories=[f"file://{globex_root}/own", f"{globex_root}/new"])
        assert gus.subscribe(made)["workingDirectories"] == [f"file://{globex_root}/own",
                                                             f"{globex_root}/new"]


def test_the_create_session_tool_refuses_a_workspace_outside_the_root(globex, roots):
    acme_repo, globex_root = roots
    place = Place(globex)
    for given, shown in escapes(acme_repo, globex_root)[:7]:
        with pytest.raises(Refused) as refused:
            place.call("create_session", relationship="independent", prompt="p", title="t", workspace=given)
        assert refused.value.sentence == outside(shown), given
    assert Session.objects.filter(tenant=globex.tenant).count() == 1


@pytest.mark.parametrize("isolation", [False, True])
def test_set_workspace_refuses_tenant_a_s_repository_and_nothing_lands(globex, roots, isolation):
    acme_repo, globex_root = roots
    place = Place(globex)
    for given, shown in escapes(acme_repo, globex_root)[:7]:
        with pytest.raises(Refused) as refused:
            place.call("set_workspace", workspaceFolder=given, isolation=isolation)
        assert refused.value.sentence == outside(shown), given
    actions.do_end_turn(place.turn.id, response_text="done")
    settle_turn_effects(place.turn.id)
    assert place.refresh().session.working_directories == []
    assert worktrees(acme_repo) == [str(acme_repo)]
    assert not acme_repo.with_name("repo.worktrees").exists()


def test_isolation_never_cuts_worktrees_beside_the_root(globex, workspace_root, roots):
    _, globex_root = roots
    subprocess.run(["git", "init", "-q", str(globex_root)], check=True)
    place = Place(globex)
    with pytest.raises(Refused) as refused:
        place.call("set_workspace", workspaceFolder=str(globex_root), isolation=True)
    assert refused.value.sentence == outside(f"{globex_root}.worktrees")
    assert place.call("set_workspace", workspaceFolder=str(globex_root), isolation=False).startswith("When this turn")


def test_isolate_session_refuses_a_chat_whose_folder_is_outside_the_root(globex, roots, worktree_agent):
    acme_repo, _ = roots
    place = Place(globex, provider=worktree_agent)
    Session.objects.filter(pk=place.session.pk).update(working_directories=[f"file://{acme_repo}"])  # a row from before
    place.chat.session = place.refresh().session
    with pytest.raises(Refused) as refused:
        place.call("isolate_session")
    assert refused.value.sentence == outside(str(acme_repo))
    assert worktrees(acme_repo) == [str(acme_repo)]


def test_a_folder_swapped_for_a_link_before_the_turn_ends_is_not_followed(globex, roots):
    acme_repo, globex_root = roots
    swapped = globex_root / "swapped"
    swapped.mkdir()
    place = Place(globex)
    place.call("set_workspace", workspaceFolder=str(swapped), isolation=True)
    swapped.rmdir()
    swapped.symlink_to(acme_repo)
    actions.do_end_turn(place.turn.id, response_text="done")
    settle_turn_effects(place.turn.id)
    assert place.refresh().session.working_directories == []
    assert worktrees(acme_repo) == [str(acme_repo)] and not swapped.with_name("swapped.worktrees").exists()


def test_a_folder_reached_through_a_link_is_refused_even_one_that_stays_inside(globex, roots):
    _, globex_root = roots
    (globex_root / "inside").symlink_to(globex_root / "own")
    with pytest.raises(Refused) as refused:
        Place(globex).call("set_workspace", workspaceFolder=str(globex_root / "inside"), isolation=False)
    assert refused.value.sentence == outside(str(globex_root / "inside"))


def test_set_workspace_over_the_socket_from_tenant_b_reads_the_refusal(globex, host, roots):
    acme_repo, _ = roots
    with AhpClient(host.port, globex.tokens["member"]) as gus:
        chat = default_chat(gus, gus.create_session())
        gus.subscribe(chat)
        arguments = json.dumps({"workspaceFolder": str(acme_repo), "isolation": True})
        assert gus.reply_to(gus.start_turn(chat, f"/call set_workspace {arguments}")) == outside(str(acme_repo))
    assert worktrees(acme_repo) == [str(acme_repo)]


def test_an_operator_sets_a_tenants_root_and_a_tenant_admin_cannot(acme, globex, workspace_root, tenant_admin,
                                                                    django_user_model):
    url = f"/admin/grants/tenant/{acme.tenant.pk}/change/"
    form = {"slug": "acme", "name": "Acme", "created_0": "2026-01-01", "created_1": "00:00:00",
            "workspace_root": str(workspace_root / "globex")}
    assert tenant_admin.post(url, form).status_code == 302
    assert Tenant.objects.get(pk=acme.tenant.pk).workspace_root == ""  # read-only to them

    operator = Client()
    operator.force_login(django_user_model.objects.create_superuser("operator", password="pw"))
    refused = operator.post(url, {**form, "workspace_root": "/etc"})
    assert (f"A tenant&#x27;s workspace root is an absolute folder inside the host&#x27;s workspace root "
            f"({workspace_root}).") in refused.content.decode()
    homes = operator.post(url, {**form, "workspace_root": str(workspace_root / ".homes" / "acme")})
    assert (f"A tenant&#x27;s workspace root cannot be in {workspace_root / '.homes'}, where the host keeps its "
            f"sandboxes&#x27; homes.") in homes.content.decode()
    custom = workspace_root / "teams" / "acme-2026"
    assert operator.post(url, {**form, "workspace_root": str(custom)}).status_code == 302
    acme.tenant.refresh_from_db()
    member = acme.principal("member")
    made = actions.do_create_session(member, uuid.uuid4(), working_directories=[f"file://{custom}/repo"])
    assert made.working_directories == [f"file://{custom}/repo"]
    with pytest.raises(Refused) as refused:
        actions.do_create_session(member, uuid.uuid4(), working_directories=[f"{workspace_root}/acme/repo"])
    assert refused.value.sentence == outside(f"{workspace_root}/acme/repo")
