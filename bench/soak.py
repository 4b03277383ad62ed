"""Soak: a long run of bench.load's shape with one tenant churning its connections; it reports
the errors, each tenant's p99 and the serving processes' memory drift.

500 sockets across 10 tenants on PostgreSQL + Redis: agents (a driver and a tool client each)
run echo turns calling host tools and their client's ping tool, the other sockets watch a chat
and list sessions; the last tenant holds no agents and instead opens and closes `--churn`
sockets at a time for the whole run. RSS drift compares the serving processes' memory (the
front and its children) at the end with their memory once warmed up (a tenth of the run in).
Targets: 0 errors, RSS drift < 10 %.

Run: `.venv/bin/python -m bench.soak --minutes 30`: on DATABASE_URL and REDIS_URL as given when
set (an empty database: the soak migrates it and adds its tenants), else on a fresh database and a
spare Redis db made and dropped, as for bench.load.
"""
import argparse
import asyncio
import contextlib
import itertools
import os
import time

from .load_clients import KINDS, TURN_TIMEOUT, Agent, Connection, Stats, opened, percentile, watch
from .servers import free_port, host_install, serving, tree_rss_kib
from .stores import DEFAULT_DATABASE, DEFAULT_REDIS, environment, fresh_database, more_tokens, own_redis_db

# A turn still running after this long is stuck, not slow: its client calls would have timed out
# by then (clientToolTimeoutMs, 600 s by default).
STUCK_AFTER = 660


async def counted(job, stats, what):
    """Run `job`; whatever it raises is an error of the run, not the end of it."""
    try:
        return await job
    except Exception as exc:
        stats.error(what, repr(exc))
        return None


async def churn(url, count, deadline, stats, counts):
    serial = itertools.count()
    while time.monotonic() < deadline:
        openings = (counted(Connection.open(url, f"churn{next(serial)}", stats), stats, "socket error")
                    for _ in range(count))
        sockets = [c for c in await opened(openings, stats) if c is not None]
        counts["opened"] += len(sockets)
        for connection in sockets:
            await connection.close()
        counts["closed"] += len(sockets)


async def soak(urls, args, server):
    """Open everything, run for the duration, let turns in flight finish, close everything."""
    tenants, quiet = args.tenants, args.tenants - 1  # the last tenant churns
    stats = [Stats() for _ in range(tenants)]
    crew = [Agent(i, urls[i % quiet], urls[i % quiet], stats[i % quiet], args.calls_per_turn)
            for i in range(args.agents)]
    await opened((counted(a.open(), a.stats, "socket error") for a in crew), stats[0])
    ready = [a for a in crew if a.announced.done()]
    watchers = [counted(Connection.open(urls[i % quiet], f"watcher{i}", stats[i % quiet]), stats[i % quiet],
                        "socket error")
                for i in range(max(0, args.connections - 2 * args.agents - args.churn))]
    watchers = list(enumerate(await opened(watchers, stats[0])))
    start = time.monotonic()
    deadline = start + args.minutes * 60
    for s in stats:
        s.window = (start, deadline)
    memory = {"start": tree_rss_kib(server.pid), "warm": None, "peak": 0, "tenths": []}
    counts = {"opened": 0, "closed": 0}

    async def sample_memory():
        """Every 5 s; kept at each tenth of the run, to see whether memory levels off."""
        while time.monotonic() < deadline:
            await asyncio.sleep(5)
            rss = tree_rss_kib(server.pid)
            memory["peak"] = max(memory["peak"], rss)
            if time.monotonic() >= start + (deadline - start) * (len(memory["tenths"]) + 1) / 10:
                memory["tenths"].append(rss)
                memory["warm"] = memory["warm"] or rss

    chats = [[a.chat for a in ready if a.index % quiet == t] for t in range(quiet)]
    jobs = [counted(a.run(deadline, patience=STUCK_AFTER - TURN_TIMEOUT), a.stats, "agent failed") for a in ready] + [
        counted(watch(w, chats[i % quiet][i % len(chats[i % quiet])], deadline, args.watch_interval,
                      stats[i % quiet]), stats[i % quiet], "watcher failed")
        for i, w in watchers if w is not None and chats[i % quiet]]
    churning = [churn(urls[quiet], args.churn, deadline, stats[quiet], counts)] if args.churn else []
    await asyncio.gather(sample_memory(), *churning, *jobs)
    memory["end"] = tree_rss_kib(server.pid)
    open_sockets = [c for a in crew for c in (a.driver, a.tools) if c is not None] + [w for _, w in watchers if w]
    for connection in open_sockets:
        await counted(connection.close(), stats[0], "socket error")
    return {"stats": stats, "memory": memory, "counts": counts, "sockets": len(open_sockets) + args.churn}


def report(outcome, args):
    stats, memory, counts = outcome["stats"], outcome["memory"], outcome["counts"]
    lines = [f"soak: {args.minutes:g} min, {outcome['sockets']} sockets over {args.tenants} tenants, {args.agents} "
             f"agents; tenant {args.tenants} churns {args.churn} sockets at a time; PostgreSQL + Redis, "
             + (f"the front before {args.processes} serving processes" if args.processes > 1 else "one serving process")]
    lines.append(f"{'tenant':>6} {'calls':>7} {'host p99 ms':>12} {'client p99 ms':>14} {'list p99 ms':>12} "
                 f"{'turns':>6} {'turn p50 s':>11} {'turn max s':>11} {'errors':>7}")
    for t, s in enumerate(stats):
        p99 = [percentile(s.latency[kind], 0.99) * 1e3 for kind in KINDS]
        calls = len(s.latency["host tool"]) + len(s.latency["client tool"])
        lines.append(f"{t + 1:>6} {calls:>7} {p99[0]:>12.0f} {p99[1]:>14.0f} {p99[2]:>12.0f} "
                     f"{len(s.turn_seconds):>6} {percentile(s.turn_seconds, 0.5):>11.1f} "
                     f"{max(s.turn_seconds, default=float('nan')):>11.1f} {sum(s.errors.values()):>7}")
    errors = sum(sum(s.errors.values()) for s in stats)
    kinds = sum((s.errors for s in stats), start=type(stats[0].errors)())
    lines.append(f"errors: {errors} ({', '.join(f'{k} {v}' for k, v in sorted(kinds.items())) or 'none'})")
    lines += [f"   e.g. {sample}" for s in stats for sample in s.samples][:8]
    lines.append(f"churned: {counts['opened']} sockets opened, {counts['closed']} closed")
    warm = memory["warm"] or memory["start"]
    lines.append(f"serving processes' RSS MiB: start {memory['start'] / 1024:.0f}, warm {warm / 1024:.0f}, peak "
                 f"{memory['peak'] / 1024:.0f}, end {memory['end'] / 1024:.0f}; drift since warm "
                 f"{100 * (memory['end'] - warm) / warm:+.1f}% (target < 10%)")
    lines.append("at each tenth of the run: " + " ".join(f"{rss / 1024:.0f}" for rss in memory["tenths"]))
    return "\n".join(lines)


def parse(argv):
    parser = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=30)
    parser.add_argument("--connections", type=int, default=500)
    parser.add_argument("--tenants", type=int, default=10)
    parser.add_argument("--agents", type=int, default=50)
    parser.add_argument("--churn", type=int, default=50, help="sockets the churning tenant opens at a time")
    parser.add_argument("--calls-per-turn", type=int, default=4)
    parser.add_argument("--watch-interval", type=float, default=5.0)
    parser.add_argument("--processes", type=int, default=2,
                        help="serving processes behind the front, as runhost serves (1: one daphne, no front)")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse(argv)
    database = os.environ.get("DATABASE_URL")
    redis = os.environ.get("REDIS_URL")
    with (contextlib.nullcontext(database) if database else fresh_database(DEFAULT_DATABASE)) as database_url, \
            (contextlib.nullcontext(redis) if redis else own_redis_db(DEFAULT_REDIS)) as redis_url, \
            environment(DATABASE_URL=database_url, REDIS_URL=redis_url), host_install() as (env, token):
        tokens = [token] + more_tokens(env, args.tenants)
        port = free_port()
        with serving("ahp.asgi:application", env, port, args.processes) as server:
            urls = [f"ws://127.0.0.1:{port}/ahp?tkn={t}" for t in tokens]
            outcome = asyncio.run(soak(urls, args, server))
    print(report(outcome, args), flush=True)


if __name__ == "__main__":
    main()
