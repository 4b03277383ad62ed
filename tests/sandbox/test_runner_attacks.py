"""The red team's ways from a member's terminal to the host's var/, tried again: each now finds
nothing. A member has a session whose folders are its own, a shell in it, and the file commands."""
import ctypes
import os
import threading
import time
import uuid
from pathlib import Path

import pytest
from django.conf import settings

from sandbox import cgroups, identity

from ..ahp.protocol.harness import AhpClient, RpcFailed
from ..conftest import tenant_made

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(os.geteuid() != 0, reason="sandbox identities need a root host")]
ROOT = "ahp-root://"
RENAME_EXCHANGE = 2


def open_terminal(client, session):
    uri = f"ahp-terminal:/{uuid.uuid4()}"
    assert client.call("createTerminal", {"channel": uri, "session": session}) is None
    client.subscribe(uri)
    return uri


def run(client, terminal, command, marker, timeout=30):
    """What `command` printed in the terminal, up to the line `marker` it ends with."""
    client.dispatch(terminal, {"type": "terminal/input", "data": f"{command}; echo {marker[:-1]}''{marker[-1]}\n"})
    seen, deadline = "", time.monotonic() + timeout
    while marker not in seen:
        seen += client.action("terminal/data", timeout=max(0.1, deadline - time.monotonic()))["action"]["data"]
    return seen


def owners_outside(workspace_root):
    """(path, uid, gid) of the host's var/ and the folders above every tenant's root."""
    paths = [settings.VAR_DIR, *Path(settings.VAR_DIR).iterdir(), workspace_root, workspace_root.parent]
    return {str(p): (os.lstat(p).st_uid, os.lstat(p).st_gid) for p in paths}


@pytest.fixture
def member(acme, host):
    with AhpClient(host.port, acme.tokens["member"], "member-client") as client:
        yield client


def test_a_working_directory_turned_into_a_link_binds_nothing_of_the_host(acme, member, workspace, workspace_root):
    (workspace / "a").mkdir()
    folder = tenant_made(workspace / "a", acme.tenant)
    (Path(settings.VAR_DIR) / "secret_key").touch()
    before = owners_outside(workspace_root)
    # The second folder does not exist yet: the session is made with it anyway.
    session = member.create_session(workingDirectories=[folder.as_uri(), (folder / "up").as_uri()])
    first = open_terminal(member, session)
    run(member, first, "ln -s ../.. up", "linked-1")
    assert (folder / "up").is_symlink()
    second = open_terminal(member, session)
    var = settings.VAR_DIR
    seen = run(member, second, f"ls {folder}/up/ {folder}/up/{var.name} 2>&1; cat {var}/secret_key 2>&1", "looked-1")
    assert f"cannot access '{folder}/up/{var.name}': No such file or directory" in seen
    assert f"cat: {var}/secret_key: No such file or directory" in seen
    after = owners_outside(workspace_root)
    assert {path: after[path] for path in before} == before  # nothing outside the workspace changed owner
    # What the host made there meanwhile (var/sandboxes, the first time a sandbox runs) is its own.
    assert {owner for path, owner in after.items() if path not in before} <= {(os.getuid(), os.getgid())}


def test_a_link_swapped_in_while_file_commands_run_reaches_nothing(acme, member, workspace, workspace_root):
    project = workspace / "app"
    (project / "dir").mkdir(parents=True)
    (project / "dir" / "file").write_text("inside\n")
    tenant_made(project, acme.tenant)
    secret = workspace_root.parent / "host-only"
    secret.mkdir(mode=0o700, exist_ok=True)
    (secret / "file").write_text("the host's secret\n")
    os.chmod(secret / "file", 0o600)
    (project / "swap").symlink_to(secret)
    member.create_session(workingDirectories=[project.as_uri()])
    libc = ctypes.CDLL(None, use_errno=True)
    stop = threading.Event()

    def swap():  # what a tenant's loop in its terminal does: renameat2(RENAME_EXCHANGE), as fast as it can
        a, b = str(project / "dir").encode(), str(project / "swap").encode()
        while not stop.is_set():
            libc.renameat2(-100, a, -100, b, RENAME_EXCHANGE)

    swapper = threading.Thread(target=swap)
    swapper.start()
    answers = set()
    try:
        for attempt in range(150):
            uri = (project / "dir" / "file").as_uri()
            try:
                answers.add(member.call("resourceRead", {"channel": ROOT, "uri": uri})["data"])
                member.call("resourceWrite", {"channel": ROOT, "uri": uri, "data": f"{attempt}\n", "encoding": "utf-8"})
            except RpcFailed as refused:
                answers.add(refused.message)
    finally:
        stop.set()
        swapper.join()
    assert "the host's secret\n" not in answers
    assert (secret / "file").read_text() == "the host's secret\n" and os.stat(secret / "file").st_uid == 0
    through = f"{project / 'dir'} is reached through a link; this host follows no link in a session's folders."
    assert through in answers  # the race was run: some requests met the link


def test_a_fork_flood_stays_in_its_session_and_its_end_kills_even_a_stopped_one(
        acme, globex, host, member, workspace, workspace_root, settings):
    settings.AHP_SANDBOX_PROCESSES = 40
    (workspace / "flood").mkdir()
    mine = tenant_made(workspace / "flood", acme.tenant)
    theirs = workspace_root / "globex" / "work"
    theirs.mkdir(parents=True)
    tenant_made(theirs, globex.tenant)
    session = member.create_session(workingDirectories=[mine.as_uri()])
    flood = open_terminal(member, session)
    run(member, flood, "nohup sleep 618 >/dev/null 2>&1 & kill -STOP $PPID", "stopped-1")
    run(member, flood, "(for i in $(seq 60); do sleep 617 & done) 2>/dev/null", "flooded-1")
    uid = identity.existing_sandbox_user(session.rsplit("/", 1)[-1])
    with AhpClient(host.port, globex.tokens["member"], "gus") as gus:
        other = gus.create_session(workingDirectories=[theirs.as_uri()])
        terminal = open_terminal(gus, other)
        assert "forked-42" in run(gus, terminal, "sh -c 'echo forked-$((6*7))'", "done-1")
    assert identity.existing_sandbox_user(other.rsplit("/", 1)[-1]) != uid
    assert len(processes_of(uid)) >= 30
    assert member.call("disposeSession", {"channel": session}) is None
    deadline = time.monotonic() + 10
    while processes_of(uid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert processes_of(uid) == []


def processes_of(uid):
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.stat(f"/proc/{pid}").st_uid == uid:
                found.append(pid)
        except FileNotFoundError:
            pass
    return found


@pytest.mark.skipif(cgroups.hierarchy() is None, reason="this host offers no memory control group")
def test_a_sessions_processes_share_one_memory_limit(acme, member, workspace, settings):
    settings.AHP_SANDBOX_SESSION_MEMORY_MB = 64
    (workspace / "big").mkdir()
    folder = tenant_made(workspace / "big", acme.tenant)
    session = member.create_session(workingDirectories=[folder.as_uri()])
    terminal = open_terminal(member, session)
    # Four processes of 40 MiB each: under any per-process limit, over the session's 64 MiB in all.
    # Each starts once the one before holds its memory or has gone: on a loaded machine too, they overlap.
    hog = "python3 -c 'import sys, time; b = b\"x\" * (40 << 20); open(sys.argv[1], \"w\").close(); time.sleep(60)'"
    seen = run(member, terminal, f"for i in 1 2 3 4; do {hog} /tmp/held-$i & "
                                 "while [ ! -e /tmp/held-$i ] && kill -0 $! 2>/dev/null; do sleep 0.1; done; done; "
                                 "sleep 1; jobs -l", "shown-1", timeout=90)
    # The kernel ended what passed the session's limit, and only that: one process of the four runs on.
    assert "Killed" in seen and "Running" in seen


def test_a_fifo_in_a_folder_is_refused_and_never_holds_the_host(acme, globex, host, member, workspace):
    (workspace / "pipes").mkdir()
    folder = tenant_made(workspace / "pipes", acme.tenant)
    (folder / "a.txt").write_text("a\n")
    session = member.create_session(workingDirectories=[folder.as_uri()])
    run(member, open_terminal(member, session), "mkfifo pipe", "made-1")
    refused = f"{folder / 'pipe'} is not a regular file; this host writes regular files only."
    started = time.monotonic()
    with pytest.raises(RpcFailed) as write:
        member.call("resourceWrite", {"channel": ROOT, "uri": (folder / "pipe").as_uri(), "data": "hi",
                                      "encoding": "utf-8"})
    with pytest.raises(RpcFailed) as copy:
        member.call("resourceCopy", {"channel": ROOT, "source": (folder / "a.txt").as_uri(),
                                     "destination": (folder / "pipe").as_uri()})
    assert (write.value.code, write.value.message) == (copy.value.code, copy.value.message) == (-32011, refused)
    with AhpClient(host.port, globex.tokens["member"], "gus") as gus:  # another tenant is served meanwhile
        assert gus.call("ping", {"channel": ROOT}) is None
    assert time.monotonic() - started < 10


def test_no_user_namespace_is_made_inside_a_sandbox(acme, member, workspace):
    (workspace / "ns").mkdir()
    folder = tenant_made(workspace / "ns", acme.tenant)
    terminal = open_terminal(member, member.create_session(workingDirectories=[folder.as_uri()]))
    seen = run(member, terminal, "unshare -Ur id; unshare -Urn true; python3 -c 'import threading, subprocess; "
                                 "t = threading.Thread(target=print, args=(\"threads-run\",)); t.start(); t.join()'",
               "tried-1")
    assert seen.count("unshare: unshare failed: Operation not permitted") == 2 and "uid=0" not in seen
    assert "threads-run" in seen  # clone3 answers ENOSYS, and threads start through clone
