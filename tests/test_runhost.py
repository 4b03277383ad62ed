"""`manage.py runhost` (what `make run` calls) on a fresh embedded install, as a newcomer runs it."""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest
from websockets.sync.client import connect

from ahp import settings as host_settings
from ahp.supervision import stop_children

from .conftest import PROCESS_DEADLINE_SECONDS, ROOT, free_port, wait_for_port

pytestmark = pytest.mark.e2e  # runhost processes


def embedded_env(var_dir):
    env = {k: v for k, v in os.environ.items() if k not in host_settings.ENVIRONMENT_KEYS}
    return {**env, "AHP_VAR_DIR": str(var_dir), "PYTHONPATH": str(ROOT)}


def ignore_ctrl_c():
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def start(env, port, starter_ignores_ctrl_c=False):
    """runhost in a process group of its own; `starter_ignores_ctrl_c`: started as a script's
    background job is, with SIGINT ignored."""
    return subprocess.Popen(
        [sys.executable, "manage.py", "runhost", "--host", "127.0.0.1", "--port", str(port)],
        env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True, preexec_fn=ignore_ctrl_c if starter_ignores_ctrl_c else None,
    )


def interrupt(process):
    """Ctrl-C, as a person at the terminal sends it, to the whole process group; what it printed
    until it stopped, read meanwhile (a full pipe would block the host's processes from exiting)."""
    os.killpg(process.pid, signal.SIGINT)
    return process.communicate(timeout=PROCESS_DEADLINE_SECONDS)[0]


def started_migrated(var_dir):
    """runhost on an embedded install in `var_dir`, migrated first; (its port, its process)."""
    env = embedded_env(var_dir)
    subprocess.run([sys.executable, "manage.py", "migrate", "--no-input"], env=env, cwd=ROOT, check=True,
                   capture_output=True)
    port = free_port()
    return port, start(env, port)


def port_closed(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
        return False
    except OSError:
        return True


def test_runhost_starts_everything_on_a_fresh_install_and_ctrl_c_stops_it(tmp_path):
    env = {**embedded_env(tmp_path), "PYTHONWARNINGS": "default"}
    migrated = subprocess.run([sys.executable, "manage.py", "migrate", "--no-input"], env=env, cwd=ROOT, check=True,
                              capture_output=True, text=True)
    port = free_port()
    host = start(env, port)
    try:
        output = ""
        while "connect a client" not in output and host.poll() is None:
            output += host.stdout.readline()
        token = re.search(r"connection token:\s+(\S+)", output).group(1)
        assert re.search(r"user admin\s+password \S+", output)
        # The banner comes after the server and the worker have started, not buried under them.
        assert output.index("Listening on TCP address") < output.index("First start: tenant 'demo' created.")

        # The first thing a newcomer does, as soon as the token is printed: a sessionless
        # create_session with a prompt answers with the new session.
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/api/v1/tools/create_session", method="POST",
            data=json.dumps({"prompt": "hello", "title": "First", "agent": "echo"}).encode(),
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
        created = json.loads(json.load(urllib.request.urlopen(request, timeout=PROCESS_DEADLINE_SECONDS))["text"])
        assert created["relationship"] == "independent" and created["agent"] == "echo"
        assert created["session"].startswith("ahp-session:/")

        # A loaded machine may take past the library's 10 s handshake default.
        with connect(f"ws://127.0.0.1:{port}/ahp?tkn={token}", open_timeout=PROCESS_DEADLINE_SECONDS) as ws:
            ws.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "channel": "ahp-root://", "protocolVersions": ["1.0.0"], "clientId": "newcomer"}}))
            assert json.loads(ws.recv(timeout=60))["result"]["protocolVersion"] == "1.0.0"

        # The worker with beat records its heartbeat at start, so /healthz names it.
        deadline = time.monotonic() + PROCESS_DEADLINE_SECONDS
        health = {}
        while time.monotonic() < deadline and not health.get("workerSeen"):
            health = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz"))
            time.sleep(0.5)
        assert health["database"] == "ok" and health["workerSeen"]
        assert urllib.request.urlopen(f"http://127.0.0.1:{port}/admin/login/").status == 200
    finally:
        rest = interrupt(host) if host.poll() is None else host.stdout.read()
    assert port_closed(port)
    assert host.returncode is not None
    output += rest
    for printed in (migrated.stdout + migrated.stderr, output):
        assert "Traceback" not in printed
        assert "RuntimeWarning" not in printed
        assert "No hostname was supplied" not in printed

    # A second start keeps the demo tenant and prints no new credentials; Ctrl-C stops it although
    # what started it ignores SIGINT.
    host = start(env, port, starter_ignores_ctrl_c=True)
    try:
        wait_for_port(port, host)
    finally:
        rest = interrupt(host)
    assert "First start" not in rest


def stopped_by(tmp_path, *signums):
    """What runhost printed until `signums`, sent to it alone (not its process group) a second
    apart, stopped it; none of its children is left running."""
    _, host = started_migrated(tmp_path)
    output = ""
    try:
        while "connect a client" not in output and host.poll() is None:
            output += host.stdout.readline()
        children = children_of(host.pid)
        assert len(children) == 3  # the front (or daphne), the Celery worker and its beat
        for i, signum in enumerate(signums):
            time.sleep(1 if i else 0)
            os.kill(host.pid, signum)
        output += host.communicate(timeout=PROCESS_DEADLINE_SECONDS)[0]
    finally:
        if host.poll() is None:
            interrupt(host)
    assert [pid for pid in children if not gone(pid)] == []
    assert "Traceback" not in output
    return output


def test_a_sigterm_while_runhost_stops_its_children_leaves_none_running(tmp_path):
    stopped_by(tmp_path, signal.SIGINT, signal.SIGTERM)  # the SIGTERM while runhost waits on its children


def test_an_interrupt_sent_to_runhost_alone_reaches_its_children_at_once(tmp_path):
    output = stopped_by(tmp_path, signal.SIGINT)  # `kill -INT <runhost>`: the terminal's group is not involved
    # The worker heard the interrupt itself, passed on by runhost; it used to get nothing until
    # runhost had waited 10 s for it, then a SIGTERM (and so on for each child: 36 s in all).
    assert "Hitting Ctrl+C again will initiate cold shutdown" in output


def test_a_hang_up_stops_runhost_and_its_children(tmp_path):
    # Its terminal closed: the children, in process groups of their own, got nothing from it.
    output = stopped_by(tmp_path, signal.SIGHUP)
    assert "Warm shutdown" in output and "Restarting" not in output  # Celery's worker restarts on a SIGHUP


def gone(pid):
    """Ended: no such process, or only its exit status is left (a zombie)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rpartition(")")[2].split()[0] == "Z"
    except FileNotFoundError:
        return True


def children_of(pid):
    """{pid: command line} of the processes `pid` started."""
    found = {}
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/children") as listing:
            for child in listing.read().split():
                try:
                    with open(f"/proc/{child}/cmdline", "rb") as cmdline:
                        found[int(child)] = cmdline.read().replace(b"\0", b" ").decode()
                except FileNotFoundError:
                    pass
    return found


def child_running(pid, marker):
    """The pid of the one child of `pid` whose command line holds `marker` (asserting there is one), or None."""
    matches = [child for child, line in children_of(pid).items() if marker in line]
    assert len(matches) <= 1, f"more than one child runs {marker}: {matches}"
    return matches[0] if matches else None


def test_runhost_starts_a_dead_child_again_and_never_runs_a_second_beat(tmp_path):
    port, host = started_migrated(tmp_path)
    lines = []

    def read_until(needle, timeout=PROCESS_DEADLINE_SECONDS):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and host.poll() is None:
            line = host.stdout.readline()
            lines.append(line)
            if needle in line:
                return line
        raise AssertionError(f"runhost never printed {needle!r}: {''.join(lines)}")

    markers = {"Celery worker": " worker ", "Celery beat": " beat ", "ASGI server": "ahp.front"}
    try:
        read_until("connect a client")
        for name, marker in markers.items():
            old = child_running(host.pid, marker)
            os.kill(old, signal.SIGKILL)
            read_until(f"The {name} exited with code -9; starting it again in 1 s.")
            read_until(f"The {name} started again")
            deadline = time.monotonic() + PROCESS_DEADLINE_SECONDS  # until the new child has exec'd its command
            while child_running(host.pid, marker) in (None, old) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert child_running(host.pid, marker) not in (None, old)
            assert child_running(host.pid, " beat ") is not None  # one beat, whichever child died
        wait_for_port(port, host)
        assert host.poll() is None
    finally:
        rest = interrupt(host)
    assert "Traceback" not in "".join(lines) + rest


def test_children_stop_although_an_interrupt_left_popens_lock_held():
    """The interrupt that stops runhost can land inside Popen.poll while it holds its lock; the
    stop must not then wait on that lock for ever (it did: runhost hung with its children gone)."""
    child = subprocess.Popen(["sleep", "30"])
    child._waitpid_lock.acquire()  # as a KeyboardInterrupt between poll's acquire and its release leaves it
    started = time.monotonic()
    stop_children([child], signal.SIGINT)
    assert time.monotonic() - started < 5 and child.returncode == -signal.SIGINT
