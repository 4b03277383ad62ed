"""Noisy neighbour: a quiet tenant's latency alone, then while another tenant floods tool calls,
in the same run, on PostgreSQL + Redis.

The quiet tenant runs `--quiet-agents` agents (turns of host and client tool calls back to back,
as bench.load's) and `--pingers` sockets sending `ping` every 50 ms, in both phases. In the flood
phase the noisy tenant's `--flood-agents` agents run their turns back to back too. Target: the
quiet tenant's ping p99 and tool-call p99 during the flood within 2x of the same alone.

Run: `.venv/bin/python -m bench.noisy` (the database and Redis db as bench.load makes them).
"""
import argparse
import asyncio
import contextlib
import os
import sys
import time

from . import load_clients, stores
from .servers import free_port, host_install, serving

PING_EVERY = 0.05
PHASES = ("alone", "flood")


async def pinger(connection, samples, stop):
    while not stop.is_set():
        started = time.perf_counter()
        await connection.call("ping", {"channel": "ahp-root://"})  # answers null
        took = time.perf_counter() - started
        if took < load_clients.REQUEST_TIMEOUT:  # else it timed out, and counts as an error
            samples.append(took)
        await asyncio.sleep(max(0.0, PING_EVERY - (time.perf_counter() - started)))


def measured_by(stats, agents):
    """From now on the agents' calls and errors count in `stats`."""
    for agent in agents:
        agent.stats = agent.driver.stats = agent.tools.stats = stats


async def drive(urls, args):
    """urls: (the quiet tenant's, the noisy tenant's) socket URL per worker."""
    setup = load_clients.Stats()
    quiet = [load_clients.Agent(i, urls[i % len(urls)][0], urls[(i + 1) % len(urls)][0], setup, args.calls_per_turn)
             for i in range(args.quiet_agents)]
    noisy = [load_clients.Agent(args.quiet_agents + i, urls[i % len(urls)][1], urls[(i + 1) % len(urls)][1], setup,
                        args.calls_per_turn) for i in range(args.flood_agents)]
    await load_clients.opened((a.open() for a in quiet + noisy), setup)
    pingers = [p for p in await load_clients.opened(
        (load_clients.Connection.open(urls[i % len(urls)][0], f"pinger{i}", setup) for i in range(args.pingers)), setup)
        if p is not None]
    phases = {}
    for phase in PHASES:
        stats, pings, stop = load_clients.Stats(), [], asyncio.Event()
        flood_stats = load_clients.Stats()
        measured_by(stats, quiet)
        measured_by(flood_stats, noisy)
        start = time.monotonic()
        deadline = start + args.seconds
        stats.window = flood_stats.window = (start, deadline)
        for connection in pingers:
            connection.stats = stats
        jobs = [asyncio.create_task(a.run(deadline)) for a in quiet + (noisy if phase == "flood" else [])]
        pinging = [asyncio.create_task(pinger(p, pings, stop)) for p in pingers]
        await asyncio.sleep(args.seconds)
        stop.set()
        await asyncio.gather(*jobs, *pinging)
        phases[phase] = {"stats": stats, "pings": pings, "flood": flood_stats}
    for connection in pingers + [c for a in quiet + noisy for c in (a.driver, a.tools) if c is not None]:
        await connection.close()
    return setup, phases


def report(setup, phases, args, workers):
    serving = f"the front before {args.processes} serving processes" if args.processes > 1 else "one serving process"
    print(f"noisy neighbour: {workers} port(s), each {serving}, on PostgreSQL + Redis; quiet tenant {args.quiet_agents} "
          f"agents and {args.pingers} sockets pinging every {PING_EVERY * 1e3:g} ms; the noisy tenant floods with "
          f"{args.flood_agents} agents; {args.seconds:g} s per phase")
    print(f"{'phase':<6} {'pings':>6} {'ping p50/p99 ms':>16} {'quiet calls':>11} {'call p50/p99 ms':>16} "
          f"{'flood calls/s':>13} {'errors':>6}")
    figures = {}
    for phase, outcome in phases.items():
        stats, pings = outcome["stats"], outcome["pings"]
        calls = stats.latency["host tool"] + stats.latency["client tool"]
        flood = outcome["flood"].latency
        figures[phase] = (load_clients.percentile(pings, 0.99), load_clients.percentile(calls, 0.99))
        errors = sum(stats.errors.values()) + sum(outcome["flood"].errors.values())
        print(f"{phase:<6} {len(pings):>6} {load_clients.percentile(pings, 0.5) * 1e3:>7.1f}/{figures[phase][0] * 1e3:<8.1f} "
              f"{len(calls):>11} {load_clients.percentile(calls, 0.5) * 1e3:>7.1f}/{figures[phase][1] * 1e3:<8.1f} "
              f"{(len(flood['host tool']) + len(flood['client tool'])) / args.seconds:>13.1f} {errors:>6}")
    for what, i in (("ping", 0), ("tool-call", 1)):
        print(f"quiet tenant's {what} p99 during the flood / alone: {figures['flood'][i] / figures['alone'][i]:.2f}x "
              f"(target <= 2)")
    samples = [s for o in [setup] + [p[k] for p in phases.values() for k in ("stats", "flood")] for s in o.samples]
    for sample in samples[:8]:
        print(f"   e.g. {sample}")


def parse(argv):
    parser = argparse.ArgumentParser(prog="python -m bench.noisy", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quiet-agents", type=int, default=2)
    parser.add_argument("--pingers", type=int, default=5)
    parser.add_argument("--flood-agents", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=20, help="length of each phase")
    parser.add_argument("--workers", type=int, default=1, help="daphnes on ports of their own")
    parser.add_argument("--processes", type=int, default=1,
                        help="serving processes behind the front, one port (as runhost serves on Redis)")
    parser.add_argument("--calls-per-turn", type=int, default=6)
    return parser.parse_args(argv)


def main(argv=()):
    args = parse(list(argv))
    database_base = os.environ.get("DATABASE_URL") or stores.DEFAULT_DATABASE
    redis_base = os.environ.get("REDIS_URL") or stores.DEFAULT_REDIS
    with stores.fresh_database(database_base) as database_url, stores.own_redis_db(redis_base) as redis_url, \
            stores.environment(DATABASE_URL=database_url, REDIS_URL=redis_url), host_install() as (env, token):
        tokens = [token] + stores.more_tokens(env, 2)
        with contextlib.ExitStack() as stack:
            ports = [free_port() for _ in range(args.workers)]
            for port in ports:
                stack.enter_context(serving("ahp.asgi:application", env, port, args.processes))
            urls = [[f"ws://127.0.0.1:{port}/ahp?tkn={t}" for t in tokens] for port in ports]
            setup, phases = asyncio.run(drive(urls, args))
    report(setup, phases, args, args.workers)


if __name__ == "__main__":
    main(sys.argv[1:])
