"""A session's requests through the node that is not its home: two nodes (each its own var/ and
node id, one shared workspace root) on DATABASE_URL and REDIS_URL; a session made on node 1 (its
home); a file command (`resourceRead`), a terminal keystroke (terminal/input to the PTY and back
as terminal/data) and a turn (chat/turnStarted of the echo agent until chat/turnComplete, on the
socket that started it) through node 2, against the same through node 1 in the same run (taken
in turn, one through each node, so both meet the same load).

Then throughput: CLIENTS sockets each reading its own session's file as fast as it is answered
for THROUGHPUT_SECONDS, all on node 1, then half on each node (each socket on its session's
home), with the CPU seconds each node's process and this client process spent.

Run: DATABASE_URL=... REDIS_URL=... `.venv/bin/python -m bench.nodes` (an empty database).
Target: through the other node p50 <= 1.5x the same node's.
"""
import asyncio
import json
import os
import time
import uuid
from typing import Any

from cryptography.fernet import Fernet

from .servers import cpu_seconds, daphne, free_port, host_install
from .ws_roundtrip import Client, percentile

READS = 300
KEYSTROKES = 300
TURNS = 100
CLIENTS = 8
THROUGHPUT_SECONDS = 10.0


async def file_reads(one, two, uri):
    """(through node 1, through node 2): one read through each in turn, so both meet the same load."""
    samples = ([], [])
    for _ in range(READS):
        for client, taken in zip((one, two), samples, strict=True):
            start = time.perf_counter()
            await client.call("resourceRead", {"uri": uri})
            taken.append(time.perf_counter() - start)
    return samples


async def keystroke(client, terminal, text):
    """Input typed through `client`'s node until its echo is back on the same socket."""
    start = time.perf_counter()
    await client.dispatch(terminal, {"type": "terminal/input", "data": f"{text}\n"})
    seen = ""
    while text not in seen:
        frame = json.loads(await client.ws.recv())
        action = frame.get("params", {}).get("action", {}) if frame.get("method") == "action" else {}
        if action.get("type") == "terminal/data":
            seen += action["data"]
    return time.perf_counter() - start


async def keystrokes(one, two, terminal):
    samples = ([], [])
    for i in range(KEYSTROKES):
        for client, taken, name in zip((one, two), samples, ("same", "other"), strict=True):
            taken.append(await keystroke(client, terminal, f"{name}-{i}."))
    return samples


async def turn(client: Client, chat: str) -> float:
    """A turn started through `client`'s node until its end is back on the same socket."""
    turn_id = str(uuid.uuid4())
    start = time.perf_counter()
    await client.dispatch(chat, {"type": "chat/turnStarted", "turnId": turn_id,
                                 "message": {"text": "hello", "origin": {"kind": "user"}}})
    while True:
        frame = json.loads(await client.ws.recv())
        action = frame.get("params", {}).get("action", {}) if frame.get("method") == "action" else {}
        if action.get("type") in ("chat/turnComplete", "chat/error") and action.get("turnId") == turn_id:
            return time.perf_counter() - start


async def turns(one: Client, two: Client, session: str) -> tuple[list[float], list[float]]:
    """(through node 1, the home; through node 2): one turn through each in turn, in one chat."""
    state = await one.call("subscribe", {"channel": session})
    chat = state["snapshot"]["state"]["defaultChat"]
    for client in (one, two):
        await client.call("subscribe", {"channel": chat})
    await turn(one, chat)  # warm-up: the agent's first turn in this chat
    samples: tuple[list[float], list[float]] = ([], [])
    for _ in range(TURNS):
        for client, taken in zip((one, two), samples, strict=True):
            taken.append(await turn(client, chat))
    return samples


async def reads_until(client: Client, uri: str, deadline: float) -> int:
    """How many reads of `uri` one socket had answered before `deadline`, one at a time."""
    done = 0
    while time.perf_counter() < deadline:
        await client.call("resourceRead", {"uri": uri})
        done += 1
    return done


async def throughput(urls: list[str], folder: str, pids: list[int], phase: str) -> dict:
    """CLIENTS sockets spread over `urls` in turn, each on a session made through its own node
    (its home) in a folder of its own, `folder`/<phase>-<i>: reads answered per second, and the CPU
    seconds each node (`pids`) and this process spent meanwhile."""
    clients, uris, sessions = [], [], []
    for i in range(CLIENTS):
        client = await Client.open(urls[i % len(urls)], f"load-{i}")
        own = f"{folder}/{phase}-{i}"  # its session's alone: the session a file is read in is its home
        sessions.append(f"ahp-session:/{uuid.uuid4()}")
        await client.call("createSession", {"channel": sessions[-1], "provider": "echo", "workingDirectories": [own]})
        clients.append(client)
        uris.append(f"{own}/notes.txt")
    await asyncio.gather(*(reads_until(c, u, time.perf_counter() + 1) for c, u in zip(clients, uris, strict=True)))
    cpu, mine, started = [cpu_seconds(pid) for pid in pids], time.process_time(), time.perf_counter()
    done = await asyncio.gather(*(reads_until(c, u, started + THROUGHPUT_SECONDS)
                                  for c, u in zip(clients, uris, strict=True)))
    elapsed = time.perf_counter() - started
    figures = {"calls/s": sum(done) / elapsed, "seconds": elapsed, "client cpu": time.process_time() - mine,
               "node cpu": [cpu_seconds(pid) - before for pid, before in zip(pids, cpu, strict=True)]}
    for client, session in zip(clients, sessions, strict=True):
        # Gone before the next phase: a file's session is looked for among all the person's.
        await client.call("disposeSession", {"channel": session})
        await client.ws.close()
    return figures


async def measure(url_1: str, url_2: str, folder: str, pids: list[int]) -> dict:
    one, two = await Client.open(url_1, "node-1-client"), await Client.open(url_2, "node-2-client")
    session = f"ahp-session:/{uuid.uuid4()}"
    await one.call("createSession", {"channel": session, "provider": "echo", "workingDirectories": [folder]})
    uri = f"{folder}/notes.txt"
    await file_reads(one, two, uri)  # warm-up: both nodes' database connections and layer subscriptions
    figures: dict[str, Any] = dict(zip(("file same", "file other"), await file_reads(one, two, uri), strict=True))
    terminal = f"ahp-terminal:/{uuid.uuid4()}"
    await one.call("createTerminal", {"channel": terminal, "session": session})
    for client in (one, two):
        await client.call("subscribe", {"channel": terminal})
    await one.dispatch(terminal, {"type": "terminal/input", "data": "stty -echo; cat\n"})
    await asyncio.sleep(1)
    figures.update(zip(("keys same", "keys other"), await keystrokes(one, two, terminal), strict=True))
    figures.update(zip(("turn same", "turn other"), await turns(one, two, session), strict=True))
    for client in (one, two):
        await client.ws.close()
    beside = folder.rsplit("/", 1)[0]  # the load's folders lie beside the project, not in it
    figures["one node"] = await throughput([url_1], beside, pids, "one")
    figures["two nodes"] = await throughput([url_1, url_2], beside, pids, "two")
    return figures


def report(name: str, samples: list[float]) -> float:
    print(f"{name:<44} p50 {percentile(samples, 0.5) * 1e3:8.2f} ms   p99 {percentile(samples, 0.99) * 1e3:8.2f} ms")
    return percentile(samples, 0.5)


def main() -> None:
    if not (os.environ.get("DATABASE_URL") and os.environ.get("REDIS_URL")):
        print("bench/nodes.py needs DATABASE_URL and REDIS_URL: two nodes share a database and a channel layer.")
        return
    with host_install() as (env, token):
        shared = os.path.join(env["AHP_VAR_DIR"], "workspaces")
        folder = os.path.join(shared, "bench", "project")
        for place in (folder, *(os.path.join(shared, "bench", f"{phase}-{i}") for phase in ("one", "two")
                                for i in range(CLIENTS))):
            os.makedirs(place)
            with open(os.path.join(place, "notes.txt"), "w") as notes:
                notes.write("a line of notes\n" * 20)
        secrets_key = Fernet.generate_key().decode()  # one for every node of the host
        nodes = [{**env, "AHP_WORKSPACE_ROOT": shared, "AHP_NODE_ID": name, "AHP_SECRETS_KEY": secrets_key,
                  "AHP_VAR_DIR": os.path.join(env["AHP_VAR_DIR"], name)} for name in ("node-1", "node-2")]
        port_1, port_2 = free_port(), free_port()
        with daphne("ahp.asgi:application", nodes[0], port_1) as node_1, \
                daphne("ahp.asgi:application", nodes[1], port_2) as node_2:
            figures = asyncio.run(measure(f"ws://127.0.0.1:{port_1}/ahp?tkn={token}",
                                          f"ws://127.0.0.1:{port_2}/ahp?tkn={token}", f"file://{folder}",
                                          [node_1.pid, node_2.pid]))
    same = report("resourceRead, on the session's home", figures["file same"])
    other = report("resourceRead, through the other node", figures["file other"])
    keys_same = report("terminal keystroke, on the session's home", figures["keys same"])
    keys_other = report("terminal keystroke, through the other node", figures["keys other"])
    print(f"resourceRead through the other node / on the home: {other / same:.2f}   (target <= 1.5)")
    turn_same = report("turn (echo agent), started on the session's home", figures["turn same"])
    turn_other = report("turn (echo agent), started through the other node", figures["turn other"])
    print(f"terminal keystroke through the other node / on the home: {keys_other / keys_same:.2f}   (target <= 1.5)")
    print(f"turn started through the other node / on the home: {turn_other / turn_same:.2f}   (target <= 1.5)")
    print(f"\nresourceRead throughput, {CLIENTS} sockets, each on its session's home, {os.cpu_count()} cores "
          f"(load average {os.getloadavg()[0]:.1f} at the end):")
    for name in ("one node", "two nodes"):
        run = figures[name]
        busy = "  ".join(f"node {i + 1} {cpu:5.1f} s" for i, cpu in enumerate(run["node cpu"]))
        print(f"  {name:<10} {run['calls/s']:8.0f} calls/s   CPU over {run['seconds']:.1f} s: {busy}  "
              f"client {run['client cpu']:5.1f} s")
    one, two = figures["one node"], figures["two nodes"]
    print(f"  What limits it: one node is one Python process, its loop and ORM threads under one GIL; it used "
          f"{one['node cpu'][0] / one['seconds']:.0%} of a core. Two nodes used "
          f"{sum(two['node cpu']) / two['seconds']:.0%} of a core together: the machine's {os.cpu_count()} cores "
          "also run PostgreSQL, Redis, this client and whatever else the machine runs (its load average), so two "
          "nodes here show the work spread over two processes, not the scaling separate machines give.")


if __name__ == "__main__":
    main()
