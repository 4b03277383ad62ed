"""What the fault tests share: private servers they may kill, and the action log's ledger."""
import contextlib
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from websockets.exceptions import ConnectionClosed

from sessions_app.models import ActionLog, ServerSeq

from ..conftest import ROOT, child_env, free_port, stop, wait_for_port


def start_daphne(tmp_path, **env):
    """A real ASGI process of the host against the test database (or `env`'s DATABASE_URL)."""
    port = free_port()
    log = open(tmp_path / f"daphne-{port}.log", "w")
    process = subprocess.Popen(
        [sys.executable, "-m", "ahp.serve", "-b", "127.0.0.1", "-p", str(port), "ahp.asgi:application"],
        env=child_env(AHP_HEARTBEAT_SECONDS="0.5", **env), cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    log.close()
    wait_for_port(port, process)
    return port, process


@contextlib.contextmanager
def host_on_private_postgres(tmp_path):
    """(the cluster, the port of a real ASGI process of the host) on a PostgreSQL of this test
    alone, holding a copy of the test database: to stop and start again."""
    from django.db import connection

    cluster = PrivatePostgres(tmp_path)
    cluster.init()
    daphne = None
    try:
        url = cluster.copy_database(connection.settings_dict)
        port, daphne = start_daphne(tmp_path, DATABASE_URL=url, REDIS_URL="")
        yield cluster, port
    finally:
        if daphne is not None:
            stop(daphne)
        cluster.remove()


class PrivateRedis:
    """A redis-server of this test alone, on its own port, to kill and start again: never the
    machine's shared one."""

    def __init__(self, directory):
        self.directory = directory
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process = None

    def start(self):
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--daemonize", "no", "--dir", str(self.directory)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for_port(self.port, self.process)

    def kill(self):
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def stop(self):
        if self.process is not None:
            stop(self.process)


def close_code(client, timeout=10):
    """The code the server closed `client` with, reading (and keeping) whatever came before."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            client.read(max(0.01, deadline - time.monotonic()))
        except ConnectionClosed as closed:
            return closed.rcvd.code if closed.rcvd else None
        except TimeoutError:
            break
        except RuntimeError:  # read after the close was already seen
            return client.ws.close_code
    raise AssertionError(f"the server did not close the connection within {timeout}s")


def log_marks():
    """Each tenant's newest serverSeq now: where a test's look at the action log starts."""
    return dict(ServerSeq.objects.values_list("tenant_id", "value"))


def logged_since(marks=None):
    marks = marks or {}
    rows = ActionLog.objects.order_by("tenant_id", "seq")
    return [row for row in rows if row.seq > marks.get(row.tenant_id, 0)]


def completions_per_call(marks=None):
    """chat/toolCallComplete actions in the log after `marks`, counted by toolCallId."""
    return Counter(row.envelope["action"]["toolCallId"] for row in logged_since(marks)
                   if row.envelope["action"]["type"] == "chat/toolCallComplete")


def assert_log_gap_free(marks=None):
    """Each tenant's serverSeqs after `marks` follow one another with no gap."""
    by_tenant = {}
    for row in logged_since(marks):
        by_tenant.setdefault(row.tenant_id, []).append(row.seq)
    for seqs in by_tenant.values():
        assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), "the action log has a gap"
    return by_tenant


def wait_until(predicate, seconds=15, step=0.1):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return False


class PrivatePostgres:
    """A PostgreSQL cluster of this test alone, in a temporary folder on its own port, holding a
    copy of the test database: never the machine's shared server. initdb refuses root, so the
    cluster belongs to the `postgres` OS user."""

    def __init__(self, directory):
        import glob

        self.bin = sorted(glob.glob("/usr/lib/postgresql/*/bin"))[-1]
        # Outside pytest's own folders, which the postgres user may not enter.
        self.directory = Path(tempfile.mkdtemp(prefix="ahp-faults-pg-")) / "cluster"
        self.port = free_port()

    def run(self, *args):
        subprocess.run(["runuser", "-u", "postgres", "--", *args], check=True, capture_output=True, timeout=60)

    def init(self):
        import shutil

        self.directory.mkdir()
        shutil.chown(self.directory.parent, "postgres", "postgres")
        shutil.chown(self.directory, "postgres", "postgres")
        self.run(f"{self.bin}/initdb", "-D", str(self.directory), "-A", "trust", "-U", "postgres", "--no-sync")
        self.start()

    def start(self):
        self.run(f"{self.bin}/pg_ctl", "-D", str(self.directory), "-w", "-l", str(self.directory / "log"), "-o",
                 f"-p {self.port} -k {self.directory} -c listen_addresses=127.0.0.1 -c fsync=off", "start")

    def stop(self, mode="fast"):
        self.run(f"{self.bin}/pg_ctl", "-D", str(self.directory), "-w", "-m", mode, "stop")

    def copy_database(self, settings_dict):
        """The test database, schema and rows, into this cluster under the same name."""
        name = settings_dict["NAME"]
        source = ["-h", settings_dict["HOST"] or "127.0.0.1", "-p", str(settings_dict["PORT"] or 5432),
                  "-U", settings_dict["USER"] or "postgres"]
        target = ["-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres"]
        subprocess.run([f"{self.bin}/createdb", *target, name], check=True, capture_output=True, timeout=60)
        dump = subprocess.run([f"{self.bin}/pg_dump", "--no-owner", *source, name], check=True,
                              capture_output=True, timeout=60).stdout
        subprocess.run([f"{self.bin}/psql", "-q", "-v", "ON_ERROR_STOP=1", *target, "-d", name], input=dump,
                       check=True, capture_output=True, timeout=60)
        return f"postgres://postgres@127.0.0.1:{self.port}/{name}"

    def remove(self):
        import shutil

        try:
            self.stop("immediate")
        except subprocess.CalledProcessError:
            pass
        shutil.rmtree(self.directory.parent, ignore_errors=True)
