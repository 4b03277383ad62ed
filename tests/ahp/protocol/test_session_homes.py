"""Two nodes (each its own var/ and node id, one shared workspace root, one PostgreSQL database
and one Redis): a session's files, terminals, turns and end, asked through the node that is not
its home (by its socket, its MCP endpoint, REST or the admin), happen at its home; once its home
dies, the other node takes it over, its harness chats included (their CLIs' state is in the
sandbox's home, on the shared root), and its terminals say they ended as soon as anyone asks."""
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import pytest
from cryptography.fernet import Fernet
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client

from agents.harness import claude_cli, copilot_cli
from sandbox import identity
from sandbox.bubblewrap import sandbox_root
from sandbox.models import SecretsKeyCheck
from sessions_app import actions
from sessions_app.actions.turns import RUNNER_GONE
from sessions_app.models import Chat, HostProcess, SessionHome, Turn
from tools_app.families.terminals.actions import LOST_WITH_ITS_PROCESS
from tools_app.families.terminals.models import Terminal
from tools_app.models import Computer, HostConfig
from tools_app.runtime.turns import launch_turn

from ...agents.model_server import ModelServer, Text
from ...conftest import ROOT, child_env, free_port, stop, tenant_made, wait_for_port
from ..mcp.helpers import tools_endpoint, with_mcp
from .harness import AhpClient, RpcFailed, default_chat
from .test_client_tools import announce, call_open_file
from .test_terminals import output_until

pytestmark = [
    pytest.mark.e2e,  # two host processes, shells under bubblewrap
    pytest.mark.skipif(
        not settings.REDIS_URL or connection.vendor != "postgresql",
        reason="two nodes share one database and one channel layer: PostgreSQL and Redis (the embedded host "
               "is one node)",
    ),
]


@pytest.fixture
def model(monkeypatch):
    """The scripted model both nodes' harnesses talk to (on loopback, allow-listed for this test)."""
    with ModelServer() as server:
        for name, value in {"ANTHROPIC_BASE_URL": server.url, "ANTHROPIC_API_KEY": "test-key",
                            "AHP_COPILOT_BASE_URL": f"{server.url}/v1", "AHP_COPILOT_API_KEY": "test-key",
                            "AHP_OUTBOUND_ALLOW": "127.0.0.1"}.items():
            monkeypatch.setenv(name, value)
        yield server


@pytest.fixture
def two_nodes(request, transactional_db, workspace, tmp_path):
    if "model" in request.fixturenames:
        request.getfixturevalue("model")  # the nodes start with its address in their environment
    # Every node of a host shares one AHP_SECRETS_KEY (each var/ would make its own), and the check
    # value it seals is this pair's, not one left by an earlier test's node.
    SecretsKeyCheck.objects.all().delete()
    secrets_key = Fernet.generate_key().decode()
    processes, ports = [], []
    for name in ("node-1", "node-2"):
        port = free_port()
        log = open(tmp_path / f"{name}.log", "w")
        processes.append(subprocess.Popen(
            [sys.executable, "-m", "ahp.serve", "-b", "127.0.0.1", "-p", str(port), "ahp.asgi:application"],
            env=child_env(AHP_HEARTBEAT_SECONDS="0.5", AHP_NODE_ID=name, AHP_VAR_DIR=str(tmp_path / name),
                          AHP_SECRETS_KEY=secrets_key),
            cwd=ROOT, stdout=log, stderr=subprocess.STDOUT))
        ports.append(port)
    try:
        for port, process in zip(ports, processes, strict=True):
            wait_for_port(port, process)
        yield ports, processes
    finally:
        for process in processes:
            stop(process)


@pytest.fixture
def project(acme, workspace):
    folder = workspace / "app"
    folder.mkdir()
    (folder / "notes.txt").write_text("kept on the shared volume\n")
    return tenant_made(folder, acme.tenant)


def node_of(process_name):
    return HostProcess.objects.get(name=process_name).node


def home_node(session_uri):
    return node_of(SessionHome.objects.get(session_id=session_uri.rsplit("/", 1)[1]).process)


def shells_under(pid):
    """Pids of the `sh` processes descending from `pid`."""
    parents, names = {}, {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/stat") as handle:
                stat = handle.read()
        except OSError:
            continue
        names[int(entry)] = stat[stat.index("(") + 1:stat.rindex(")")]
        parents[int(entry)] = int(stat[stat.rindex(")") + 2:].split()[1])
    found = []
    for child in parents:
        ancestor = parents.get(child)
        while ancestor and ancestor != pid:
            ancestor = parents.get(ancestor)
        if ancestor == pid and names[child] == "sh":
            found.append(child)
    return found


def until(condition, timeout=15):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "it did not happen in time"
        time.sleep(0.1)


def open_terminal(client, session):
    uri = f"ahp-terminal:/{uuid.uuid4()}"
    assert client.call("createTerminal", {"channel": uri, "session": session}) is None
    client.subscribe(uri)
    return uri


def test_files_and_terminals_asked_through_the_other_node_happen_at_the_sessions_home(acme, two_nodes, project):
    (port_1, port_2), (node_1, _) = two_nodes
    with AhpClient(port_1, acme.tokens["member"], "one") as one, AhpClient(port_2, acme.tokens["member"], "two") as two:
        session = one.create_session(workingDirectories=[project.as_uri()])
        assert one.call("resourceList", {"uri": project.as_uri()}) == {"entries": [{"name": "notes.txt", "type": "file"}]}
        assert home_node(session) == "node-1"

        written = (project / "plan.md").as_uri()
        assert two.call("resourceWrite", {"uri": written, "data": "# plan\n", "encoding": "utf-8"}) == {}
        assert two.call("resourceRead", {"uri": written})["data"] == "# plan\n"
        assert [e["name"] for e in two.call("resourceList", {"uri": project.as_uri()})["entries"]] == [
            "notes.txt", "plan.md"]
        with pytest.raises(RpcFailed) as missing:
            two.call("resourceRead", {"uri": (project / "gone.txt").as_uri()})
        assert (missing.value.code, missing.value.message) == (-32008, f"No file {project / 'gone.txt'}.")
        assert home_node(session) == "node-1"

        terminal = open_terminal(two, session)
        assert node_of(Terminal.objects.get(id=terminal.rsplit("/", 1)[1]).process) == "node-1"
        two.dispatch(terminal, {"type": "terminal/input", "data": "cat notes.txt; echo done-$((6*7))\n"})
        assert "kept on the shared volume" in output_until(two, terminal, "done-42")
        two.dispatch(terminal, {"type": "terminal/resized", "cols": 120, "rows": 40})
        two.dispatch(terminal, {"type": "terminal/input", "data": "stty size\n"})
        assert "40 120" in output_until(two, terminal, "40 120")
        assert shells_under(node_1.pid)
        refused_the_same_on_both_nodes(acme, (port_1, port_2), session, terminal, written)
        assert two.call("disposeTerminal", {"channel": terminal}) is None
        until(lambda: not shells_under(node_1.pid))

        open_terminal(two, session)
        until(lambda: shells_under(node_1.pid))
        assert two.call("disposeSession", {"channel": session}) is None
        until(lambda: not shells_under(node_1.pid))
        assert not Terminal.objects.exists()


def refused_the_same_on_both_nodes(people, ports, session, terminal, written):
    """A guest (reads, changes nothing) asks each node: the home refuses what it relays in the
    words it refuses its own socket's request with, as the guest, not as the node that asked."""
    answers = []
    for port in ports:
        with AhpClient(port, people.tokens["guest"], f"guest-{port}") as guest:
            with pytest.raises(RpcFailed) as write:
                guest.call("resourceWrite", {"uri": written, "data": "overwritten", "encoding": "utf-8"})
            with pytest.raises(RpcFailed) as dispose:
                guest.call("disposeTerminal", {"channel": terminal})
            answers.append(((write.value.code, write.value.message), (dispose.value.code, dispose.value.message)))
    assert answers[0] == answers[1]
    assert answers[0][0][0] == -32009
    assert Terminal.objects.filter(id=terminal.rsplit("/", 1)[1]).exists()


def test_a_turn_asked_through_the_other_node_runs_and_is_cancelled_at_the_home(acme, two_nodes):
    (port_1, port_2), _ = two_nodes
    with AhpClient(port_1, acme.tokens["member"], "ide") as ide, AhpClient(port_2, acme.tokens["member"], "two") as two:
        session = ide.create_session()
        chat = default_chat(two, session)
        announce(ide, session)
        two.subscribe(chat)
        turn, _ = call_open_file(two, chat)
        assert node_of(Turn.objects.get(id=turn).runner) == "node-1"
        assert home_node(session) == "node-1"
        two.dispatch(chat, {"type": "chat/turnCancelled", "turnId": turn})
        two.action("chat/turnCancelled", turnId=turn)
        assert Turn.objects.get(id=turn).state == "cancelled"
        # A rejection said at the home reaches the asking client, in the same words.
        two.dispatch(chat, {"type": "chat/turnCancelled", "turnId": turn})
        assert two.action("chat/turnCancelled", rejected=True)["rejectionReason"] == (
            f"No turn {turn} is running in this chat.")


def test_a_turn_the_host_begins_in_another_process_runs_at_the_sessions_home(acme, two_nodes):
    (_, port_2), _ = two_nodes
    with AhpClient(port_2, acme.tokens["member"], "two") as two:
        session = two.create_session()
        chat = default_chat(two, session)
        two.subscribe(chat)
        # As a wakeup fires in a Celery worker: begun and launched in a process that is not the home.
        turn, _ = actions.do_send_message(acme.principal("member"), Chat.objects.get(id=chat.rsplit("/", 1)[1]),
                                          "woken up", origin_kind="automation")
        launch_turn(turn.id)
        assert two.reply_to(str(turn.id)) == "woken up"
        assert node_of(Turn.objects.get(id=turn.id).runner) == "node-2"


def test_a_session_whose_home_died_mid_turn_is_used_through_the_other_node(acme, two_nodes, project):
    (port_1, port_2), (node_1, _) = two_nodes
    with AhpClient(port_1, acme.tokens["member"], "one") as one, AhpClient(port_2, acme.tokens["member"], "two") as two:
        session = one.create_session(workingDirectories=[project.as_uri()])
        chat = default_chat(two, session)
        announce(two, session)
        two.subscribe(chat)
        turn = one.start_turn(chat, '/call two__open_file {"path": "README.md"}')
        two.action("chat/toolCallStart", turnId=turn)
        assert home_node(session) == "node-1"

        node_1.send_signal(signal.SIGKILL)
        node_1.wait()
        killed = time.monotonic()
        later = two.start_turn(chat, "still here")
        assert two.action("chat/error", turnId=turn)["action"]["error"]["message"] == RUNNER_GONE
        assert two.reply_to(later) == "still here"
        assert two.call("resourceRead", {"uri": (project / "notes.txt").as_uri()})["data"] == (
            "kept on the shared volume\n")
        terminal = open_terminal(two, session)
        two.dispatch(terminal, {"type": "terminal/input", "data": "echo back-$((6*7))\n"})
        output_until(two, terminal, "back-42")
        assert time.monotonic() - killed < 30
        assert home_node(session) == "node-2"


HARNESS_CLIS = {"claude": claude_cli, "github-copilot": copilot_cli}


@pytest.mark.parametrize("provider", HARNESS_CLIS)
def test_a_harness_chat_whose_node_died_goes_on_through_the_other_node_with_its_history(acme, model, two_nodes,
                                                                                       provider):
    if HARNESS_CLIS[provider]() is None:
        pytest.skip(f"needs the {provider} CLI (make harness)")
    (port_1, port_2), (node_1, _) = two_nodes
    model.add(Text("first answer"), Text("second answer"))
    with AhpClient(port_1, acme.tokens["member"], "one") as one:
        session = one.create_session(provider=provider)
        chat = default_chat(one, session)
        one.subscribe(chat)
        assert one.reply_to(one.start_turn(chat, "remember 17"), timeout=90) == "first answer"
    assert home_node(session) == "node-1"

    node_1.send_signal(signal.SIGKILL)
    node_1.wait()
    killed = time.monotonic()
    with AhpClient(port_2, acme.tokens["member"], "two") as two:
        two.subscribe(chat)
        assert two.reply_to(two.start_turn(chat, "what was it?"), timeout=30) == "second answer"
    assert time.monotonic() - killed < 30
    assert home_node(session) == "node-2"
    first, second = model.agent_requests()
    assert "what was it?" in second.last_user_text()
    assert "remember 17" in str(second.body["messages"]) and "first answer" in str(second.body["messages"])


def test_links_a_member_plants_in_the_shared_home_reach_nothing_on_the_node_that_takes_it_over(
        acme, two_nodes, tmp_path, workspace_root):
    """A member of session A links, in A's home, to session B's home and to the other node's own
    files, then A is re-homed on that node and disposed: its terminal there finds nothing behind
    the links, and the host, removing A's home, removes the links and nothing they name."""
    (port_1, port_2), (node_1, _) = two_nodes
    host_file = tmp_path / "node-2" / "host-only.txt"
    host_file.write_text("the node's own\n")
    with AhpClient(port_1, acme.tokens["member"], "one") as one:
        own, other = one.create_session(), one.create_session()
        theirs = open_terminal(one, other)
        one.dispatch(theirs, {"type": "terminal/input", "data": "echo hidden > ~/secret.txt; echo made-$((6*7))\n"})
        output_until(one, theirs, "made-42")
        homes = workspace_root / ".homes"
        other_home = homes / other.rsplit("/", 1)[1]
        planted = open_terminal(one, own)
        one.dispatch(planted, {"type": "terminal/input", "data": (
            f"ln -s {other_home} ~/theirs; ln -s {host_file} ~/host; ln -s {host_file.parent} ~/var; "
            "mkdir -p ~/.claude && ln -s ~/theirs/secret.txt ~/.claude/projects; echo planted-$((6*7))\n")})
        output_until(one, planted, "planted-42")
    own_home = homes / own.rsplit("/", 1)[1]
    uid = identity.existing_sandbox_user(own.rsplit("/", 1)[1])
    assert (os.stat(homes).st_uid, os.stat(homes).st_mode & 0o777) == (0, 0o700)
    assert (os.stat(own_home).st_uid, os.stat(own_home).st_mode & 0o777) == (uid, 0o700)
    assert os.readlink(own_home / "host") == str(host_file)

    node_1.send_signal(signal.SIGKILL)
    node_1.wait()
    with AhpClient(port_2, acme.tokens["member"], "two") as two:
        terminal = open_terminal(two, own)
        two.dispatch(terminal, {"type": "terminal/input", "data": (
            "id -u; cat ~/theirs/secret.txt ~/host ~/.claude/projects; ls ~/var; echo read-$((6*7))\n")})
        seen = output_until(two, terminal, "read-42")
        assert home_node(own) == "node-2"
        assert str(uid) in seen
        assert "hidden" not in seen and "the node's own" not in seen and "No such file or directory" in seen
        assert two.call("disposeSession", {"channel": own}) is None
        until(lambda: not own_home.exists())
    assert (other_home / "secret.txt").read_text() == "hidden\n"
    assert host_file.read_text() == "the node's own\n"


def call_tool(url, token, name, **arguments):
    """The tool's answer through the official MCP client: its JSON text, read back."""
    result = with_mcp(url, token, lambda mcp: mcp.call_tool(name, arguments))
    assert not result.isError, result.content[0].text
    return json.loads(result.content[0].text)


def test_a_tool_called_through_the_other_nodes_mcp_endpoint_runs_at_the_sessions_home(acme, two_nodes, tmp_path):
    (port_1, port_2), _ = two_nodes
    HostConfig.for_tenant(acme.tenant)
    HostConfig.objects.filter(tenant=acme.tenant).update(advanced_tools=True)  # the computer tools
    with AhpClient(port_1, acme.tokens["member"], "one") as one:
        session = one.create_session()
    endpoint = tools_endpoint(port_1, acme.tokens["member"], session).json()
    via_1, via_2 = endpoint["url"], endpoint["url"].replace(f":{port_1}/", f":{port_2}/")
    assert via_2 != via_1

    computer = call_tool(via_1, endpoint["token"], "request_disposable_computer")["computer"]
    call_tool(via_1, endpoint["token"], "run_in_computer", computer=computer, command="echo made-on-the-home > note")
    # A computer is a sandbox on its home's disk: node 2 alone has no such root.
    ran = call_tool(via_2, endpoint["token"], "run_in_computer", computer=computer, command="cat note")
    assert (ran["exitCode"], ran["stdout"]) == (0, "made-on-the-home\n")
    key = Computer.objects.get(pk=computer).sandbox_key
    relative = sandbox_root().relative_to(sandbox_root().parent)
    assert (tmp_path / "node-1" / relative / key).is_dir()  # its launch folder: node 1 ran it
    assert not (tmp_path / "node-2" / relative / key).exists()
    assert (Path(settings.AHP_WORKSPACE_ROOT) / ".homes" / key / "note").is_file()  # its home, on the shared root
    # Refused at the home in the words it refuses its own caller with.
    missing = "00000000-0000-4000-8000-000000000000"
    refusals = [with_mcp(url, endpoint["token"], lambda mcp: mcp.call_tool(
        "run_in_computer", {"computer": missing, "command": "true"})) for url in (via_1, via_2)]
    assert [(r.isError, r.content[0].text) for r in refusals] == [
        (True, f"No computer {missing} in this session; request_disposable_computer makes one.")] * 2


def test_a_session_ended_through_rest_on_the_other_node_ends_its_shells_at_its_home(acme, two_nodes):
    (port_1, port_2), (node_1, _) = two_nodes
    with AhpClient(port_1, acme.tokens["member"], "one") as one:
        session = one.create_session()
        open_terminal(one, session)
        until(lambda: shells_under(node_1.pid))
    # REST on node 2: the sessionless delete_session tool.
    answer = httpx.post(f"http://127.0.0.1:{port_2}/api/v1/tools/delete_session", json={"session": session},
                        headers={"Authorization": f"Bearer {acme.tokens['member']}"})
    assert (answer.status_code, answer.json()["text"]) == (200, json.dumps({"deleted": session})), answer.text
    until(lambda: not shells_under(node_1.pid))
    assert not Terminal.objects.exists()


def test_the_admin_deletes_no_session_so_leaves_no_shell_running(acme, two_nodes):
    """The admin's session pages are read-only, and a tenant that has sessions cannot be deleted
    there: no admin page ends a session's rows behind its home's back."""
    (port_1, _), (node_1, _) = two_nodes
    with AhpClient(port_1, acme.tokens["member"], "one") as one:
        session = one.create_session()
        open_terminal(one, session)
        until(lambda: shells_under(node_1.pid))
    admin = Client()
    admin.force_login(get_user_model().objects.create_superuser("operator", password="x"))
    for page in (f"/admin/sessions_app/session/{session.rsplit('/', 1)[1]}/delete/",
                 f"/admin/grants/tenant/{acme.tenant.pk}/delete/"):
        assert admin.post(page, {"post": "yes"}).status_code == 403
    assert shells_under(node_1.pid) and Terminal.objects.exists()


def test_a_terminal_whose_home_died_says_it_ended_as_soon_as_anyone_asks(acme, two_nodes):
    (port_1, port_2), (node_1, _) = two_nodes
    with AhpClient(port_1, acme.tokens["member"], "one") as one:
        session = one.create_session()
        terminal = open_terminal(one, session)
        until(lambda: shells_under(node_1.pid))
    node_1.send_signal(signal.SIGKILL)
    node_1.wait()
    killed = time.monotonic()
    with AhpClient(port_2, acme.tokens["member"], "two") as two:
        # No sweep runs here (no Celery beat): the asking itself ends it, once node 1's lease lapsed.
        until(lambda: two.subscribe(terminal).get("exitCode") == LOST_WITH_ITS_PROCESS, timeout=10)
        assert time.monotonic() - killed < 5
        listed = {t["resource"]: t for t in two.subscribe("ahp-root://")["terminals"]}
        assert listed[terminal]["exitCode"] == LOST_WITH_ITS_PROCESS
