"""Terminals over a real socket: a shell on a PTY in the session's sandbox, its output as
terminal/data, input and resizes from the client, its end as terminal/exited."""
import os
import time
import uuid
from pathlib import Path

import pytest

from sandbox.bubblewrap import NO_BUBBLEWRAP

from .harness import AhpClient, RpcFailed

ROOT = "ahp-root://"

pytestmark = pytest.mark.e2e  # each terminal is a real shell under bubblewrap


@pytest.fixture
def project(workspace):
    folder = workspace / "app"
    folder.mkdir()
    (folder / "notes.txt").write_text("inside the sandbox\n")
    return folder


@pytest.fixture
def member(acme, host):
    with AhpClient(host.port, acme.tokens["member"], "member-client") as client:
        yield client


def open_terminal(client, session, **params):
    uri = f"ahp-terminal:/{uuid.uuid4()}"
    assert client.call("createTerminal", {"channel": uri, "session": session, **params}) is None
    client.subscribe(uri)
    return uri


def output_until(client, uri, needle, timeout=20):
    """The terminal's output (terminal/data) until `needle` shows in it."""
    seen, deadline = "", time.monotonic() + timeout
    while needle not in seen:
        seen += client.action("terminal/data", timeout=max(0.1, deadline - time.monotonic()))["action"]["data"]
    return seen


def test_a_terminal_runs_a_command_in_the_sessions_folder_and_reads_its_output(member, project):
    session = member.create_session(workingDirectories=[project.as_uri()])
    uri = open_terminal(member, session, cols=100, rows=30)
    state = member.subscribe(uri)
    assert (state["cwd"], state["cols"], state["rows"], state["claim"]) == (
        project.as_uri(), 100, 30, {"kind": "client", "clientId": "member-client"})
    member.dispatch(uri, {"type": "terminal/input", "data": "cat notes.txt; echo done-$((6*7))\n"})
    output = output_until(member, uri, "done-42")
    assert "inside the sandbox" in output
    member.dispatch(uri, {"type": "terminal/resized", "cols": 120, "rows": 40})
    member.action("terminal/resized")
    member.dispatch(uri, {"type": "terminal/input", "data": "stty size\n"})
    assert "40 120" in output_until(member, uri, "40 120")
    # The shell runs in the sandbox, not on the host: the project tree is not there, nor the environment.
    manage_py = Path(__file__).resolve().parents[3] / "manage.py"
    assert manage_py.exists()
    member.dispatch(uri, {"type": "terminal/input", "data": f"ls {manage_py} || echo gone-$((1+1)); env | grep -c _URL\n"})
    listing = output_until(member, uri, "gone-2")
    assert "No such file" in listing
    member.dispatch(uri, {"type": "terminal/input", "data": "exit 3\n"})
    assert member.action("terminal/exited")["action"]["exitCode"] == 3
    assert member.subscribe(uri)["exitCode"] == 3
    member.dispatch(uri, {"type": "terminal/input", "data": "echo late\n"})
    assert member.action("terminal/input", rejected=True)["rejectionReason"] == f"Terminal {uri} has exited."


def test_a_host_without_bubblewrap_refuses_a_terminal_and_keeps_none(member, project, monkeypatch, tmp_path):
    session = member.create_session(workingDirectories=[project.as_uri()])
    monkeypatch.setenv("PATH", str(tmp_path))  # the server runs in this process: bwrap is nowhere on its PATH
    uri = f"ahp-terminal:/{uuid.uuid4()}"
    with pytest.raises(RpcFailed) as refused:
        member.call("createTerminal", {"channel": uri, "session": session})
    assert (refused.value.code, refused.value.message) == (-32603, NO_BUBBLEWRAP)
    with pytest.raises(RpcFailed) as unknown:
        member.subscribe(uri)
    assert unknown.value.code == -32008
    monkeypatch.undo()
    assert open_terminal(member, session)  # the same session opens one once bubblewrap is back


def test_ahp_terminals_lists_the_hosts_open_terminals(member, project):
    session = member.create_session(workingDirectories=[project.as_uri()])
    uri = open_terminal(member, session, name="build")
    chat = member.subscribe(session)["defaultChat"]
    member.subscribe(chat)
    turn = member.start_turn(chat, "/call ahp_terminals {}")
    assert member.reply_to(turn) == f"{uri}\tbuild\t{project.as_uri()}\trunning"
    assert member.call("disposeTerminal", {"channel": uri}) is None
    turn = member.start_turn(chat, "/call ahp_terminals {}")
    assert member.reply_to(turn) == "No terminals are open on this host."


def test_a_terminal_opens_only_inside_the_sessions_folders(member, project, workspace):
    session = member.create_session(workingDirectories=[project.as_uri()])
    elsewhere = workspace / "other"
    elsewhere.mkdir()
    with pytest.raises(RpcFailed) as failed:
        open_terminal(member, session, cwd=elsewhere.as_uri())
    assert failed.value.message == f"{elsewhere.as_uri()} is not a folder in the session's working directories."


def test_a_guest_may_not_open_or_type_into_a_terminal(acme, host, member, project):
    session = member.create_session(workingDirectories=[project.as_uri()])
    uri = open_terminal(member, session)
    with AhpClient(host.port, acme.tokens["guest"], "guest") as guest:
        with pytest.raises(RpcFailed) as failed:
            open_terminal(guest, session)
        assert failed.value.message == "acme-guest may not terminal:write here"
        with pytest.raises(RpcFailed) as failed:
            guest.subscribe(uri)
        assert failed.value.message == f"No channel {uri} here."


def test_another_tenant_cannot_see_or_type_into_a_terminal(globex, host, member, project):
    session = member.create_session(workingDirectories=[project.as_uri()])
    uri = open_terminal(member, session)
    with AhpClient(host.port, globex.tokens["root"], "intruder") as intruder:
        intruder.dispatch(uri, {"type": "terminal/input", "data": "touch pwned\n"})
        assert intruder.call("ping", {"channel": "ahp-root://"}) is None
        with pytest.raises(RpcFailed):
            intruder.subscribe(uri)
    member.dispatch(uri, {"type": "terminal/input", "data": "ls; echo fin-$((2+2))\n"})
    assert "pwned" not in output_until(member, uri, "fin-4")


def test_a_session_holds_a_bounded_number_of_open_terminals(member, project, settings):
    settings.AHP_MAX_TERMINALS_PER_SESSION = 2
    session = member.create_session(workingDirectories=[project.as_uri()])
    first, _ = open_terminal(member, session), open_terminal(member, session)
    with pytest.raises(RpcFailed) as refused:
        member.call("createTerminal", {"channel": f"ahp-terminal:/{uuid.uuid4()}", "session": session})
    assert (refused.value.code, refused.value.message) == (
        -32011, "This session has 2 open terminals, the most it may; dispose of one first.")
    member.dispatch(first, {"type": "terminal/input", "data": "exit 0\n"})
    member.action("terminal/exited")
    open_terminal(member, session)  # an exited one no longer counts


def terminals_changed(client):
    return client.action("root/terminalsChanged")["action"]["terminals"]


def test_the_root_state_lists_the_tenants_terminals_and_root_terminals_changed_keeps_it(acme, host, member, project):
    assert member.subscribe(ROOT)["terminals"] == []
    session = member.create_session(workingDirectories=[project.as_uri()])
    uri = open_terminal(member, session, name="build")
    mine = {"kind": "client", "clientId": "member-client"}
    assert terminals_changed(member) == [{"resource": uri, "title": "build", "claim": mine}]
    with AhpClient(host.port, acme.tokens["admin"], "admin-client") as admin:
        assert admin.subscribe(ROOT)["terminals"] == [{"resource": uri, "title": "build", "claim": mine}]
        member.dispatch(uri, {"type": "terminal/titleChanged", "title": "logs"})
        assert member.action("terminal/titleChanged")["action"] == {"type": "terminal/titleChanged", "title": "logs"}
        assert terminals_changed(admin) == [{"resource": uri, "title": "logs", "claim": mine}]
        member.dispatch(uri, {"type": "terminal/input", "data": "exit 5\n"})
        assert terminals_changed(admin) == [{"resource": uri, "title": "logs", "claim": mine, "exitCode": 5}]
        assert member.subscribe(ROOT)["terminals"] == [{"resource": uri, "title": "logs", "claim": mine, "exitCode": 5}]
        assert member.call("disposeTerminal", {"channel": uri}) is None
        assert terminals_changed(admin) == []
        assert admin.subscribe(ROOT)["terminals"] == []


def test_only_the_terminals_a_subscriber_may_read_are_listed_to_it(acme, globex, host, member, project):
    session = member.create_session(workingDirectories=[project.as_uri()])
    first = open_terminal(member, session, name="first")
    assert [t["resource"] for t in member.subscribe(ROOT)["terminals"]] == [first]
    with AhpClient(host.port, acme.tokens["guest"], "guest") as guest, \
            AhpClient(host.port, globex.tokens["root"], "intruder") as intruder:
        assert guest.subscribe(ROOT)["terminals"] == []  # a guest holds no terminal:read
        assert intruder.subscribe(ROOT)["terminals"] == []
        second = open_terminal(member, session, name="second")
        assert [t["resource"] for t in terminals_changed(member)] == [first, second]
        assert terminals_changed(guest) == []
        member.dispatch(second, {"type": "terminal/titleChanged", "title": "renamed"})
        member.action("terminal/titleChanged")
        assert terminals_changed(guest) == []
        assert intruder.call("ping", {"channel": ROOT}) is None
        assert not [f for f in intruder.notifications if f.get("method") == "action"]
        last_seen = guest.init_result["serverSeq"]
    # What a reconnecting guest missed is replayed as it may see it too.
    with AhpClient(host.port, acme.tokens["guest"], "guest", initialize=False) as guest:
        replay = guest.call("reconnect", {"channel": ROOT, "clientId": "guest", "lastSeenServerSeq": last_seen,
                                          "subscriptions": [ROOT]})
    listed = [e["action"]["terminals"] for e in replay["actions"] if e["action"]["type"] == "root/terminalsChanged"]
    assert replay["type"] == "replay" and listed == [[], []]


def test_a_client_renames_and_clears_a_terminal(acme, host, member, project):
    session = member.create_session(workingDirectories=[project.as_uri()])
    uri = open_terminal(member, session)
    # No prompt after the output (PS1 is empty from then on): the clear finds the shell quiet.
    member.dispatch(uri, {"type": "terminal/input", "data": "PS1=''; echo before-$((3*3))\n"})
    output_until(member, uri, "before-9")
    member.dispatch(uri, {"type": "terminal/cleared"})
    assert member.action("terminal/cleared")["action"] == {"type": "terminal/cleared"}
    assert member.subscribe(uri)["content"] == []
    member.dispatch(uri, {"type": "terminal/titleChanged", "title": "x" * 201})
    assert member.action("terminal/titleChanged", rejected=True)["rejectionReason"] == (
        "terminal/titleChanged needs a title that is a string of at most 200 characters.")
    member.dispatch(uri, {"type": "terminal/titleChanged", "title": "server"})
    member.action("terminal/titleChanged", title="server")
    assert member.subscribe(uri)["title"] == "server"
    with AhpClient(host.port, acme.tokens["guest"], "guest") as guest:
        for action in ({"type": "terminal/titleChanged", "title": "mine"}, {"type": "terminal/cleared"}):
            guest.dispatch(uri, action)  # a terminal it may not read is not there: ignored without a word
        assert guest.call("ping", {"channel": ROOT}) is None
        assert not [f for f in guest.notifications if f.get("method") == "action"]
    assert member.subscribe(uri)["title"] == "server"


def test_a_session_without_a_working_directory_opens_a_terminal_in_a_folder_of_its_own(member, workspace):
    bare = member.create_session()
    uri = open_terminal(member, bare)
    folder = Path(os.path.realpath(workspace)) / ".sessions" / bare.removeprefix("ahp-session:/")
    assert member.subscribe(uri)["cwd"] == folder.as_uri()
    member.dispatch(uri, {"type": "terminal/input", "data": "pwd; touch made-here; echo made-$((4+4))\n"})
    output = output_until(member, uri, "made-8")
    assert str(folder) in output
    assert (folder / "made-here").is_file()
    if os.geteuid() == 0:  # made by the session's sandbox user, not by the host as root
        assert folder.stat().st_uid != 0 and (folder / "made-here").stat().st_uid == folder.stat().st_uid
    # Another such session of the tenant gets a folder of its own beside it.
    other = member.create_session()
    assert member.subscribe(open_terminal(member, other))["cwd"] == (folder.parent / other.removeprefix(
        "ahp-session:/")).as_uri()
    with pytest.raises(RpcFailed) as failed:
        open_terminal(member, bare, cwd=workspace.as_uri())
    assert failed.value.message == f"{workspace.as_uri()} is not a folder in the session's working directories."


def test_a_sessions_own_folder_goes_with_it_and_a_link_there_is_not_followed(member, workspace):
    bare = member.create_session()
    uri = open_terminal(member, bare)
    folder = Path(os.path.realpath(workspace)) / ".sessions" / bare.removeprefix("ahp-session:/")
    kept = workspace / "kept"
    kept.mkdir()
    (kept / "precious.txt").write_text("keep me")
    member.dispatch(uri, {"type": "terminal/input", "data": f"mkdir -p a/b; touch a/b/c; ln -s {kept} out; "
                                                            f"ln -s {kept}/precious.txt a/file; echo done-$((2+2))\n"})
    output_until(member, uri, "done-4")
    assert (folder / "out").is_symlink() and (folder / "a" / "b" / "c").is_file()
    assert member.call("disposeSession", {"channel": bare}) is None
    deadline = time.monotonic() + 15
    while folder.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not folder.exists() and folder.parent.is_dir()
    assert (kept / "precious.txt").read_text() == "keep me"


def test_a_disposed_sessions_terminals_leave_the_root_list(member, project):
    member.subscribe(ROOT)
    session = member.create_session(workingDirectories=[project.as_uri()])
    uri = open_terminal(member, session)
    assert [t["resource"] for t in terminals_changed(member)] == [uri]
    assert member.call("disposeSession", {"channel": session}) is None
    assert terminals_changed(member) == []
