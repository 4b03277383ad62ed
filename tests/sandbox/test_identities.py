"""A sandbox's user id is the host's, recorded in the database: every node runs the sandbox as
the same user, and a machine's own claim of the number follows the database. Its home, on the
shared root, is that user's from the moment it has its name."""
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from django.conf import settings

from sandbox import identity
from sandbox.bubblewrap import Sandbox, end_sandbox
from sandbox.homes import home_folder
from sandbox.models import SandboxUser


def claim_of(number):
    return Path(settings.AHP_SANDBOX_ID_FOLDER) / str(number)


def test_a_sandbox_user_is_recorded_once_for_the_host_and_freed_with_its_sandbox(db):
    uid = identity.sandbox_user("recorded-once")
    identity._users.clear()  # another process (another node) asks: the database answers
    assert identity.sandbox_user("recorded-once") == uid
    assert SandboxUser.objects.get(key="recorded-once").uid == uid
    assert claim_of(uid).read_text() == "sandbox recorded-once"
    assert identity.sandbox_user("recorded-twice") != uid
    identity.free_sandbox_user("recorded-once")
    assert not SandboxUser.objects.filter(key="recorded-once").exists() and not claim_of(uid).exists()


def test_a_node_taking_a_sandbox_over_holds_its_number_unless_its_machine_holds_it_for_another_host(db):
    uid = identity.sandbox_user("taken-over")
    identity._users.clear()
    claim_of(uid).write_text("sandbox ended-on-another-node")  # the database gives the number to none of it
    assert identity.sandbox_user("taken-over") == uid
    assert claim_of(uid).read_text() == "sandbox taken-over"

    identity._users.clear()
    claim_of(uid).write_text("tenant 424242")
    with pytest.raises(identity.NoIdentity) as refused:
        identity.sandbox_user("taken-over")
    assert str(refused.value) == (f"This machine holds sandbox identity {uid} for another host; hosts whose nodes "
                                  "share machines need AHP_SANDBOX_IDS ranges of their own.")
    claim_of(uid).write_text("sandbox taken-over")
    identity.free_sandbox_user("taken-over")


@pytest.mark.skipif(os.geteuid() != 0, reason="a home's owner is a sandbox user only on a host run as root")
def test_a_home_left_by_another_identity_is_made_anew_for_the_sandboxs_user(db, workspace_root):
    home = workspace_root / ".homes" / "left-behind"
    sandbox = Sandbox("left-behind")
    os.close(home_folder("left-behind", (sandbox.owner()[0] + 1, sandbox.owner()[1] + 1)))
    (home / "old.txt").write_text("an earlier identity's")
    os.chown(home / "old.txt", sandbox.owner()[0] + 1, sandbox.owner()[1] + 1)
    assert sandbox.run(["/bin/sh", "-c", "id -u; ls -A ~; touch ~/mine"]).stdout == f"{sandbox.owner()[0]}\n"
    assert sorted(os.listdir(home)) == ["mine"] and home.stat().st_uid == sandbox.owner()[0]
    end_sandbox("left-behind")
    assert not home.exists()


def test_launches_making_one_home_at_once_all_bind_the_one_their_user_owns(db, workspace_root):
    owner = (os.getuid() + 1, os.getgid() + 1) if os.geteuid() == 0 else (os.getuid(), os.getgid())
    with ThreadPoolExecutor(8) as launches:
        homes = list(launches.map(lambda _: home_folder("made-at-once", owner), range(8)))
    try:
        assert {(os.fstat(fd).st_ino, os.fstat(fd).st_uid) for fd in homes} == {
            ((workspace_root / ".homes" / "made-at-once").stat().st_ino, owner[0])}
        assert os.listdir(workspace_root / ".homes") == ["made-at-once"]
    finally:
        for fd in homes:
            os.close(fd)
