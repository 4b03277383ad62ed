"""Load: many clients across tenants, echo agents calling host tools and client tools, on
PostgreSQL and Redis, served as runhost serves them: one daphne, or the front before N serving
processes (ahp/front.py: each tenant's connections reach the process serving it); then the same
with more processes, and how the figures moved.

Each agent is two connections: a driver that owns the session and starts turns, and a tool
client that is the session's active client and answers its `ping`. A turn
is CALLS_PER_TURN lines `/call <tool> <json>`, alternating a cheap host tool (list_sessions,
get_current_session, list_artifacts_and_references) and the tool client's ping. The remaining
connections watch: each subscribes to one agent's chat and sends `listSessions` every few
seconds.

A call's latency is what the driver sees: from the previous event of the agent's loop (its
turn's dispatch, or the previous call's completion) to the call's `chat/toolCallComplete`. It
holds the catalog snapshot, the call's start, its run (for a client tool the round trip to the
tool client) and its completion, delivered through Redis.

Errors counted: every failed call, `chat/error`, JSON-RPC error answer, rejected action,
request or turn that timed out, and socket error or close this client did not ask for.

Messages the channel layer dropped, counted two ways. The layer's own word: the serving
processes' log lines where a layer message was lost (a send that failed, a receive loop that
lost Redis, channels_redis' list layer's "over capacity"). And what the clients got: every
action the log holds for an agent's chat must have reached its driver by the end (1 s after the
drain; the host's log catch-up, every 5 s, may have sent some of them late, which this does not
see).

The serving processes' CPU is what they (the front and its children) used during the window, per
tool call completed in it; the load client's own share of the machine is reported beside it (it
shares the cores).

The database (fresh, dropped after) is made on the server of DATABASE_URL, or on
postgres://postgres@127.0.0.1:5432; Redis is the db REDIS_URL names (redis://127.0.0.1:6379/15
without it), which must be empty, emptied after. No Celery worker runs: client-tool deadlines (10 min)
never fall due within a run.

Run: `.venv/bin/python -m bench.load` (a small configuration) or
`.venv/bin/python -m bench.load --connections 500 --tenants 10 --agents 200 --seconds 60 --workers 1,2`.
"""
import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

from .load_clients import KINDS, Agent, Connection, Stats, opened, percentile, watch
from .servers import descendants, free_port, host_install, serving, tree_rss_kib
from .stores import DEFAULT_DATABASE, DEFAULT_REDIS, environment, fresh_database, more_tokens, own_redis_db
from .usage import Usage

# What a serving process logs when a channel layer message was lost.
LAYER_LOSSES = ("Could not deliver", "The channel layer's receive loop failed", "The channel layer failed",
                "over capacity")


# Running and reporting ---------------------------------------------------------------------------

async def drive(urls, tenants, agents, connections, seconds, calls_per_turn, watch_interval, server):
    """Open everything, run for `seconds`, let turns in flight finish, close everything."""
    stats = Stats()
    setup_started = time.monotonic()
    # Agent i is on tenant i % tenants.
    crew = [Agent(i, urls[i % tenants], urls[i % tenants], stats, calls_per_turn) for i in range(agents)]
    await opened((a.open() for a in crew), stats)
    ready = [a for a in crew if a.announced.done()]
    watchers = []
    for i in range(max(0, connections - 2 * agents)):
        watchers.append(Connection.open(urls[i % tenants], f"watcher{i}", stats))
    watchers = [w for w in await opened(watchers, stats) if w is not None]
    setup = time.monotonic() - setup_started
    rss_start = tree_rss_kib(server.pid)
    usage = Usage()
    usage.start()
    start = time.monotonic()
    deadline = start + seconds
    stats.window = (start, deadline)
    peak = rss_start

    async def sample_memory():
        nonlocal peak
        while time.monotonic() < deadline:
            await asyncio.sleep(min(1.0, max(0.0, deadline - time.monotonic())))
            peak = max(peak, tree_rss_kib(server.pid))
        usage.stop()  # CPU of the window alone, as the calls counted are the window's

    tenant_chats = [[a.chat for a in ready if a.index % tenants == t] or [None] for t in range(tenants)]
    jobs = [a.run(deadline) for a in ready] + [
        watch(w, tenant_chats[i % tenants][i % len(tenant_chats[i % tenants])], deadline, watch_interval, stats)
        for i, w in enumerate(watchers) if tenant_chats[i % tenants][0]]
    await asyncio.gather(sample_memory(), *jobs)
    drained = time.monotonic() - deadline
    await asyncio.sleep(1)  # the last actions of the last turns
    rss_end = tree_rss_kib(server.pid)
    open_sockets = [c for a in crew for c in (a.driver, a.tools) if c is not None] + watchers
    if len(open_sockets) < connections:
        stats.error("socket error", f"only {len(open_sockets)} of {connections} connections opened")
    for connection in open_sockets:
        await connection.close()
    return {"stats": stats, "setup": setup, "drained": drained, "usage": usage, "sockets": len(open_sockets),
            "rss": (rss_start, peak, rss_end), "seconds": seconds, "agents": ready}


def run_once(args, worker_count, database_base, redis_base):
    with fresh_database(database_base) as database_url, own_redis_db(redis_base) as redis_url, \
            environment(DATABASE_URL=database_url, REDIS_URL=redis_url), host_install() as (env, token):
        tokens = [token] + more_tokens(env, args.tenants)
        log = Path(env["AHP_VAR_DIR"]) / "serving.log"
        port = free_port()
        with serving("ahp.asgi:application", env, port, worker_count, log) as server:
            urls = [f"ws://127.0.0.1:{port}/ahp?tkn={t}" for t in tokens]
            outcome = asyncio.run(drive(urls, args.tenants, args.agents, args.connections, args.seconds,
                                        args.calls_per_turn, args.watch_interval, server))
            outcome["worker_pids"] = descendants(server.pid)
        outcome["layer_losses"] = layer_losses([log])
        outcome["missed"] = missed_actions(database_url, outcome.pop("agents"))
    outcome["workers"] = worker_count
    return outcome


def layer_losses(logs):
    """Lines of the serving processes' logs that tell of a channel layer message lost."""
    return sum(1 for log in logs for line in log.read_text(errors="replace").splitlines()
               if any(loss in line for loss in LAYER_LOSSES))


def missed_actions(database_url, agents):
    """(missed, logged): of the actions the log holds for the agents' chats since each driver
    subscribed, how many their drivers never got."""
    import psycopg

    by_chat = {a.chat: a for a in agents}
    missed = logged = 0
    with psycopg.connect(database_url) as db:
        rows = db.execute("SELECT channel, seq FROM sessions_app_actionlog WHERE channel = ANY(%s)",
                          (list(by_chat),)).fetchall()
    for channel, seq in rows:
        agent = by_chat[channel]
        if seq > agent.chat_from:
            logged += 1
            missed += seq not in agent.heard
    return missed, logged


def report(outcome, args):
    stats, usage = outcome["stats"], outcome["usage"]
    print(f"-- {serving_processes(outcome['workers'])}: {outcome['sockets']} connections, {args.tenants} tenants, "
          f"{args.agents} agents, {args.seconds} s on PostgreSQL + Redis")
    print(f"setup {outcome['setup']:.1f} s; turns in flight drained in {outcome['drained']:.1f} s after the window")
    print(f"{'kind':<24} {'calls':>7} {'per s':>8} {'p50 ms':>9} {'p99 ms':>9}")
    for kind in KINDS:
        samples = stats.latency[kind]
        print(f"{kind:<24} {len(samples):>7} {len(samples) / args.seconds:>8.1f} "
              f"{percentile(samples, 0.5) * 1e3:>9.1f} {percentile(samples, 0.99) * 1e3:>9.1f}")
    tool_calls = len(stats.latency["host tool"]) + len(stats.latency["client tool"])
    print(f"tool calls per second: {tool_calls / args.seconds:.1f}")
    print(f"serving processes' CPU per tool call: {server_cpu_per_call(outcome) * 1e3:.1f} ms "
          f"(during the window; target <= 4)")
    detail = ", ".join(f"{k} {v}" for k, v in sorted(stats.errors.items())) or "none"
    print(f"errors: {sum(stats.errors.values())} ({detail})")
    print(f"channel layer: {outcome['layer_losses']} losses in the serving processes' logs; "
          f"{outcome['missed'][0]} of the {outcome['missed'][1]} logged actions of the agents' chats never reached "
          "their drivers")
    for sample in stats.samples:
        print(f"   e.g. {sample}")
    start, peak, end = outcome["rss"]
    cpu = ", ".join(f"{usage.percent.get(pid, (0, ''))[0]:.0f}%" for pid in outcome["worker_pids"])
    print(f"serving processes' RSS MiB: start {start / 1024:.0f}, peak {peak / 1024:.0f}, end {end / 1024:.0f}; "
          f"CPU {cpu} of a core (the front first)")
    print(f"load client CPU {usage.client_percent:.0f}% of a core; machine {usage.machine_percent:.0f}% busy "
          f"({os.cpu_count()} cores)")
    mine = set(outcome["worker_pids"]) | {os.getpid()}
    others = sorted(((pct, name) for pid, (pct, name) in usage.percent.items() if pid not in mine and pct >= 2),
                    reverse=True)[:6]
    print("busiest other processes: " + "; ".join(f"{pct:.0f}% {name[:70]}" for pct, name in others))


def p50_p99_ms(samples):
    return f"{percentile(samples, 0.5) * 1e3:.0f}/{percentile(samples, 0.99) * 1e3:.0f}"


def serving_processes(count):
    return "one daphne" if count == 1 else f"the front before {count} serving processes"


def server_cpu_per_call(outcome):
    """CPU seconds the workers used while measured, per tool call measured."""
    usage, lat = outcome["usage"], outcome["stats"].latency
    seconds = sum(usage.percent.get(pid, (0,))[0] for pid in outcome["worker_pids"]) / 100 * usage.elapsed
    return seconds / max(1, len(lat["host tool"]) + len(lat["client tool"]))


def summary(outcomes, args):
    print("-- from one serving process to more")
    print(f"{'workers':>7} {'calls/s':>8} {'per worker':>10} {'host p50/p99 ms':>17} {'client p50/p99 ms':>19} "
          f"{'list p50/p99 ms':>17} {'errors':>6} {'dropped':>7} {'RSS peak MiB':>14} {'CPU/call ms':>12} "
          f"{'client CPU':>10}")
    for o in outcomes:
        lat = o["stats"].latency
        per_s = (len(lat["host tool"]) + len(lat["client tool"])) / args.seconds
        host, client, listing = (p50_p99_ms(lat[kind]) for kind in KINDS)
        print(f"{o['workers']:>7} {per_s:>8.1f} {per_s / o['workers']:>10.1f} {host:>17} "
              f"{client:>19} {listing:>17} {sum(o['stats'].errors.values()):>6} "
              f"{o['layer_losses'] + o['missed'][0]:>7} {o['rss'][1] / 1024:>14.0f} "
              f"{server_cpu_per_call(o) * 1e3:>12.1f} {o['usage'].client_percent:>9.0f}%")


def parse(argv):
    parser = argparse.ArgumentParser(prog="python -m bench.load", description=__doc__.split("\n\n")[0])
    parser.add_argument("--connections", type=int, default=60)
    parser.add_argument("--tenants", type=int, default=3)
    parser.add_argument("--agents", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--workers", default="1,2",
                        help="serving process counts to run, e.g. 1,2 (1: one daphne; more: the front before them)")
    parser.add_argument("--calls-per-turn", type=int, default=6)
    parser.add_argument("--watch-interval", type=float, default=10.0, help="seconds between a watcher's listSessions")
    args = parser.parse_args(argv)
    if args.connections < 2 * args.agents:
        parser.error("each agent takes two connections: --connections must be at least 2 x --agents")
    args.workers = [int(w) for w in args.workers.split(",")]
    return args


def main(argv=()):
    args = parse(list(argv))
    database_base = os.environ.get("DATABASE_URL") or DEFAULT_DATABASE
    redis_base = os.environ.get("REDIS_URL") or DEFAULT_REDIS
    outcomes = []
    for count in args.workers:
        outcomes.append(run_once(args, count, database_base, redis_base))
        report(outcomes[-1], args)
    if len(outcomes) > 1:
        summary(outcomes, args)


if __name__ == "__main__":
    main(sys.argv[1:])
