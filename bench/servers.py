"""Servers the socket benchmarks start: the host itself on a fresh embedded install (or on
DATABASE_URL/REDIS_URL when set), and the floors it is compared with, each as a subprocess."""
import contextlib
import fcntl
import itertools
import os
import secrets
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO

ROOT = Path(__file__).resolve().parent.parent


# Under pytest-xdist each worker takes its servers' ports from a range of its own, below the
# ephemeral range outgoing connections use: with ports the kernel picks, two workers could be
# handed one port while their servers started, and a test then reached the other worker's server
# (a 403 for a token of another test database). A worker holds its range by a lock file for its
# life, so two test runs on one machine (two checkouts, a CI run beside a developer's) never
# share a range either: numbering ranges by worker gave both runs' first workers the same one.
PORTS_PER_WORKER = 500
FIRST_WORKER_PORT = 20000
PORT_RANGES = (32768 - FIRST_WORKER_PORT) // PORTS_PER_WORKER
_ports_taken = itertools.count()
_range_held: list[tuple[int, IO[str]]] = []  # (first port, its lock file) once this worker holds a range


def worker_ports():
    """The first port of the range this pytest worker holds."""
    if not _range_held:
        for number in range(PORT_RANGES):
            lock = open(os.path.join(tempfile.gettempdir(), f"ahp-test-ports-{number}.lock"), "w")
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                lock.close()
                continue
            _range_held.append((FIRST_WORKER_PORT + number * PORTS_PER_WORKER, lock))
            break
        else:
            raise RuntimeError(f"all {PORT_RANGES} test port ranges are held by other pytest workers")
    return _range_held[0][0]


def free_port():
    if not os.environ.get("PYTEST_XDIST_WORKER", "").startswith("gw"):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]
    first = worker_ports()
    for _ in range(PORTS_PER_WORKER):
        port = first + next(_ports_taken) % PORTS_PER_WORKER
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue  # still held (a server of an earlier test closing, TIME_WAIT)
            return port
    raise RuntimeError(f"no free port in {first}-{first + PORTS_PER_WORKER - 1}")


def wait_for_port(port, process, timeout=90):
    # Generous: a loaded machine (a fresh clone's `make test` beside other jobs) took over 30 s to start runhost.
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.1)
    raise TimeoutError(f"nothing listened on {port} within {timeout}s")


def rss_kib(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def descendants(pid):
    """`pid` and every process below it (the front's serving processes)."""
    found = [pid]
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):
            for child in (task / "children").read_text().split():
                found += descendants(int(child))
    return found


def tree_rss_kib(pid):
    """The memory of `pid` and its descendants: a host served through the front is several processes."""
    return sum(rss_kib(p) for p in descendants(pid) if Path(f"/proc/{p}").exists())


def cpu_seconds(pid):
    """User + system CPU a process (and the children it waited for) has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return sum(int(v) for v in fields[11:15]) / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def running(args, env, port, log=None):
    """`args` running until the block ends; its output goes to the file `log`, else to the one
    AHP_BENCH_SERVER_LOG names (to read the host's log after a run), else nowhere."""
    log = log or os.environ.get("AHP_BENCH_SERVER_LOG")
    with open(log, "ab") if log else contextlib.nullcontext(subprocess.DEVNULL) as output:
        process = subprocess.Popen(args, env=env, cwd=ROOT, stdout=output, stderr=subprocess.STDOUT)
        try:
            wait_for_port(port, process)
            yield process
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()


def manage(env, *args):
    out = subprocess.run([sys.executable, "manage.py", *args], env=env, cwd=ROOT, capture_output=True, text=True,
                         check=True)
    return out.stdout.strip()


@contextlib.contextmanager
def host_install():
    """A fresh install: its environment and a member token of tenant `bench`."""
    with tempfile.TemporaryDirectory() as var_dir:
        env = {**os.environ, "AHP_VAR_DIR": var_dir, "PYTHONPATH": str(ROOT), "LOG_LEVEL": "WARNING",
               # A host on DATABASE_URL starts only with a key of the operator's.
               "SECRET_KEY": os.environ.get("SECRET_KEY") or secrets.token_urlsafe(50),
               # The benchmarks' clients share one person's token where real ones would be many people.
               **{f"AHP_MAX_{quota}": "1000000" for quota in ("SESSIONS_PER_PERSON", "CHATS_PER_PERSON",
                                                              "CREATIONS_PER_MINUTE", "CONNECTIONS_PER_PERSON")}}
        manage(env, "migrate", "--no-input")
        manage(env, "createtenant", "bench")
        manage(env, "addmember", "bench", "bencher", "--role", "member")
        yield env, manage(env, "minttoken", "bench", "bencher")


def daphne(app, env, port, log=None):
    return running([sys.executable, "-m", "ahp.serve", "-b", "127.0.0.1", "-p", str(port), app], env, port, log)


def serving(app, env, port, processes, log=None):
    """The host's serving tier as runhost starts it: one daphne, or the front (ahp/front.py)
    before `processes` of them."""
    if processes == 1:
        return daphne(app, env, port, log)
    return running([sys.executable, "-m", "ahp.front", "-p", str(port), "--processes", str(processes), app],
                   env, port, log)
