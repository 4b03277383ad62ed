import contextlib
import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.contrib.auth import get_user_model
from django.db import connection

from bench.servers import free_port, wait_for_port  # noqa: F401 (tests import them from here)
from grants.actions import do_add_member, do_create_tenant, do_mint_token
from grants.models import Principal

ROOT = Path(__file__).resolve().parent.parent
# How long a test waits for a process it started (a Celery worker, runhost) to start, do its work
# or stop: seconds on a quiet machine, minutes on one whose cores other jobs hold; a deadline, so a
# fast run never waits it out.
PROCESS_DEADLINE_SECONDS = 180


def pytest_configure(config):
    """A run starts with no sandbox id claimed (tests/settings.py), since the run before may have
    been stopped before its sandboxes ended; unless another run in this checkout holds them now."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return
    (ROOT / "var" / "xdist").mkdir(parents=True, exist_ok=True)
    config._sandbox_ids_lock = lock = open(ROOT / "var" / "xdist" / "sandbox-ids.lock", "w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        fcntl.flock(lock, fcntl.LOCK_SH)  # held for the run: no later run clears what this one holds
        return
    for folder in (ROOT / "var" / "xdist" / "sandbox-ids", *ROOT.glob("var/xdist/*/sandboxes/tenant-groups"),
                   ROOT / "var" / "sandboxes" / "tenant-groups"):
        shutil.rmtree(folder, ignore_errors=True)
    fcntl.flock(lock, fcntl.LOCK_SH)


class People:
    """A tenant with one person of each built-in role, their tokens, and the tenant's root token."""

    def __init__(self, slug):
        self.tenant = do_create_tenant(slug)
        User = get_user_model()
        self.tokens = {}
        for role in ("admin", "member", "guest"):
            username = f"{slug}-{role}"
            do_add_member(self.tenant, username, role)
            setattr(self, role, User.objects.get(username=username))
            _, self.tokens[role] = do_mint_token(self.tenant, person=getattr(self, role), name=username)
        _, self.tokens["root"] = do_mint_token(self.tenant, name=f"{slug}-root")

    def principal(self, role):
        if role == "root":
            return Principal.root(self.tenant)
        return Principal.for_person(self.tenant, getattr(self, role))


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_blocker):
    """pytest-django's, closing the ORM pool's and the tool threads' connections before the test
    database is dropped. On PostgreSQL the connections other threads of this process still hold
    (executor threads of the test servers' loops) are cut too: with any left, the drop failed and
    every run left its databases behind on the server."""
    yield
    from kernel import orm
    from tools_app.tool_threads import TOOL_THREADS

    orm.close_connections()
    TOOL_THREADS.close_connections()
    if connection.vendor == "postgresql":
        with django_db_blocker.unblock(), connection.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                           "WHERE datname = current_database() AND pid <> pg_backend_pid()")


@pytest.fixture
def acme(db):
    return People("acme")


@pytest.fixture
def globex(db):
    return People("globex")


def child_env(**overrides):
    """Environment for a host process a test starts: the test database, this repo on the path."""
    env = dict(os.environ)
    settings = connection.settings_dict
    if settings["ENGINE"].endswith("sqlite3"):
        env["DATABASE_URL"] = f"sqlite:///{settings['NAME']}"
    else:
        env["DATABASE_URL"] = (
            f"postgres://{settings['USER']}:{settings['PASSWORD'] or ''}@{settings['HOST']}:{settings['PORT']}"
            f"/{settings['NAME']}"
        )
    env["PYTHONPATH"] = str(ROOT)
    # The child is a host on a database URL, which starts only with a key: the test process's own.
    env["SECRET_KEY"] = django_settings.SECRET_KEY
    env["AHP_WORKSPACE_ROOT"] = str(django_settings.AHP_WORKSPACE_ROOT)
    env.update(overrides)
    return env


def manage(*command):
    """A management command run as the operator runs it, in a process of its own; its output."""
    done = subprocess.run([sys.executable, "manage.py", *command], env=child_env(), cwd=ROOT, capture_output=True,
                          text=True, timeout=PROCESS_DEADLINE_SECONDS)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def stop(process):
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture
def live_server_process(transactional_db):
    """A real daphne serving the host against the test database; yields its port."""
    with production_server() as port:
        yield port


@contextlib.contextmanager
def production_server(**env):
    """The production server (`ahp.serve`) on a free port, with `env` over the test's; its port."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "ahp.serve", "-b", "127.0.0.1", "-p", str(port), "ahp.asgi:application"],
        env=child_env(**env), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, process)
        yield port
    finally:
        stop(process)


@pytest.fixture
def host(transactional_db):
    """The production server (`ahp.serve`'s daphne) in this process, for tests that also act on it
    in process; its port."""
    from .ahp.protocol.harness import ServerThread

    with ServerThread() as server:
        yield server


@pytest.fixture
def tenant_admin(acme):
    """The Django test client logged in as acme's tenant admin (staff, not superuser)."""
    from django.test import Client

    acme.admin.is_staff = True
    acme.admin.save()
    client = Client()
    client.force_login(acme.admin)
    return client


@pytest.fixture
def allow_loopback(settings):
    """The host connects to 127.0.0.1 only when the operator allow-lists it (the default stays
    closed): tests that serve on loopback say so."""
    settings.AHP_OUTBOUND_ALLOW = "127.0.0.1/32"


@pytest.fixture(autouse=True)
def workspace_root(settings, tmp_path_factory):
    """Every test gets a host workspace root of its own; a tenant's root is <it>/<slug>."""
    settings.AHP_WORKSPACE_ROOT = str(tmp_path_factory.mktemp("workspaces"))
    return Path(settings.AHP_WORKSPACE_ROOT)


@pytest.fixture
def workspace(acme, workspace_root):
    """acme's workspace root, made: the folders acme's sessions may work in live under it."""
    root = workspace_root / acme.tenant.slug
    root.mkdir()
    return root


def tenant_made(path, tenant):
    """What a test made as root under a tenant's root, handed over as if the tenant's sessions had
    made it: its group's and group-writable (the host never does this to a tenant's files)."""
    from sandbox import identity

    if os.geteuid() != 0:
        return path
    gid = identity.tenant_group(tenant.id)
    for folder, dirs, files in os.walk(path):
        for name in (folder, *(os.path.join(folder, d) for d in dirs), *(os.path.join(folder, f) for f in files)):
            os.lchown(name, -1, gid)
            if not os.path.islink(name):
                os.chmod(name, os.stat(name).st_mode | (0o2070 if os.path.isdir(name) else 0o060))
    return path


def sandbox_home(session_uri):
    """The home of a session's sandbox, on the host's workspace root (sandbox/homes.py)."""
    return Path(django_settings.AHP_WORKSPACE_ROOT) / ".homes" / session_uri.rsplit("/", 1)[-1]


@pytest.fixture
def no_agent_programs(monkeypatch):
    """A host with no ACP command and neither harness CLI, whatever this machine has installed:
    only the agents that need no program of their own can start."""
    monkeypatch.delenv("AHP_ACP_AGENT_COMMAND", raising=False)
    monkeypatch.setenv("COPILOT_CLI_PATH", "/nonexistent/copilot")
    monkeypatch.setenv("AHP_CLAUDE_CLI_PATH", "/nonexistent/claude")
