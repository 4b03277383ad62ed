"""Scale: what a call costs as one tenant's sessions grow (1k, 10k, 100k rows, bulk-created,
every tenth with a second chat). Per read: calls per second (median of repeated rounds) and
queries per call, at each size, then the cost at the largest size over the cost at the smallest.
Target: flat or logarithmic, never linear.

The reads: the chat's catalog (what every model request assembles), the session tools an agent
calls most (list_sessions, get_current_session, get_session_context,
list_artifacts_and_references), the socket's listSessions (first page, and the next page by its
cursor) and a session snapshot. Tools are called the way a turn calls them: through the chat's
catalog snapshot, with the context the runtime hands an executor.

Runs on a fresh PostgreSQL database (on DATABASE_URL's server, or postgres://postgres@127.0.0.1:5432,
dropped after), ANALYZEd after each growth; `--embedded` runs it on SQLite instead.

Run: `.venv/bin/python -m bench.scale` or `.venv/bin/python -m bench.scale --sizes 1000,10000`.
"""
import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
import uuid

from .servers import ROOT, host_install
from .stores import DEFAULT_DATABASE, environment, fresh_database

BATCH = 5000
ROUNDS = 7


def grow(tenant, owner, total):
    """Bulk-create sessions (a default chat each, a side chat on every tenth) up to `total`."""
    from sessions_app.models import Chat, Session

    have = Session.objects.for_tenant(tenant).count()
    while have < total:
        count = min(BATCH, total - have)
        sessions = Session.objects.bulk_create(
            Session(tenant=tenant, owner=owner, title=f"bulk {have + i}", working_directories=[f"/srv/{i % 50}"])
            for i in range(count))
        Chat.objects.bulk_create([Chat(session=s, is_default=True) for s in sessions] +
                                 [Chat(session=s, title="side") for s in sessions[::10]])
        have += count


def timed(read, seconds=0.2):
    """(calls per second: median over ROUNDS rounds of at least `seconds`, queries per call)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    read()
    with CaptureQueriesContext(connection) as captured:
        read()
    rates = []
    for _ in range(ROUNDS):
        calls, started = 0, time.perf_counter()
        while True:
            read()
            calls += 1
            elapsed = time.perf_counter() - started
            if elapsed >= seconds:
                break
        rates.append(calls / elapsed)
    return statistics.median(rates), len(captured)


def measure(sizes):
    """In a child process on the install (tenant `bench`, member `bencher`)."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ahp.settings")
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.db import connection

    from ahp.protocol.consumer import AhpConsumer
    from grants.models import Principal, Tenant
    from sessions_app import actions, state
    from tools_app.catalog.loader import catalog_for_chat
    from tools_app.runtime.context import ToolCallContext

    tenant = Tenant.objects.get(slug="bench")
    person = get_user_model().objects.get(username="bencher")
    principal = Principal.for_person(tenant, person)
    session = actions.do_create_session(principal, uuid.uuid4(), "echo", ["/srv/here"])
    chat = session.chats.get(is_default=True)
    turn = actions.do_start_turn(principal, chat, uuid.uuid4(), "working")
    actions.do_set_active_client(principal, session, "ide", {"clientId": "ide", "tools": [
        {"name": "ping", "inputSchema": {"type": "object", "properties": {}}}]})
    context = ToolCallContext(principal, session, chat, turn, "call")
    consumer = AhpConsumer()
    consumer.principal, consumer.tenant = principal, tenant

    def tool(name, **arguments):
        return lambda: catalog_for_chat(chat).check_input(name, arguments).tool.executor(context, arguments)

    def second_page():
        consumer.list_sessions(50, consumer.list_sessions(50, None)["nextCursor"])

    reads = {
        "catalog": lambda: catalog_for_chat(chat),
        "list_sessions": tool("list_sessions"),
        "list_sessions ws": tool("list_sessions", workspace="/srv/here"),
        "get_current_session": tool("get_current_session"),
        "get_session_context": tool("get_session_context", session=session.uri),
        "list_artifacts": tool("list_artifacts_and_references"),
        "listSessions p1": lambda: consumer.list_sessions(50, None),
        "listSessions p1+p2": second_page,
        "session snapshot": lambda: state.session_state(session, {}),
    }
    results = {}
    for size in sizes:
        grow(tenant, person, size)
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("ANALYZE")
        results[size] = {name: timed(read) for name, read in reads.items()}
    print(json.dumps({"vendor": connection.vendor, "results": results}))


def report(outcome, sizes):
    results = {int(k): v for k, v in outcome["results"].items()}
    names = list(results[sizes[0]])
    print(f"on {outcome['vendor']}; calls per second (queries per call)")
    print(f"{'read':<20}" + "".join(f"{f'{s} sessions':>18}" for s in sizes) + f"{'cost ratio':>12}")
    for name in names:
        cells = "".join(f"{results[s][name][0]:>12.0f} ({results[s][name][1]:>2})" for s in sizes)
        ratio = results[sizes[0]][name][0] / results[sizes[-1]][name][0]
        print(f"{name:<20}{cells}{ratio:>12.2f}")
    print(f"cost ratio: time per call at {sizes[-1]} sessions over time per call at {sizes[0]} "
          f"({sizes[-1] // sizes[0]}x the rows); 1 is flat, {sizes[-1] // sizes[0]} would be linear")


def main(argv=()):
    parser = argparse.ArgumentParser(prog="python -m bench.scale", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--embedded", action="store_true", help="run on SQLite, not PostgreSQL")
    args = parser.parse_args(list(argv))
    sizes = sorted(int(s) for s in args.sizes.split(","))
    database = contextlib.nullcontext(None) if args.embedded else fresh_database(
        os.environ.get("DATABASE_URL") or DEFAULT_DATABASE)
    with database as url, environment(**({"DATABASE_URL": url} if url else {})):
        if not url:
            os.environ.pop("DATABASE_URL", None)
        with host_install() as (env, _):
            out = subprocess.run([sys.executable, "-c", f"from bench.scale import measure; measure({sizes})"],
                                 env=env, cwd=ROOT, capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(out.stderr[-3000:])
    report(json.loads(out.stdout.strip().splitlines()[-1]), sizes)


if __name__ == "__main__":
    main(sys.argv[1:])
