"""A session's requests through the node that is not its home: two nodes (each its own var/ and
node id, one shared workspace root) on DATABASE_URL and REDIS_URL; a session made on node 1 (its
home); a file command (`resourceRead`) and a terminal keystroke (terminal/input to the PTY and
back as terminal/data) through node 2, against the same through node 1 in the same run (taken in
turn, one through each node, so both meet the same load).

Run: DATABASE_URL=... REDIS_URL=... `.venv/bin/python -m bench.nodes` (an empty database).
Target: through the other node p50 <= 1.5x the same node's.
"""
import asyncio
import json
import os
import time
import uuid

from cryptography.fernet import Fernet

from .servers import daphne, free_port, host_install
from .ws_roundtrip import Client, percentile

READS = 300
KEYSTROKES = 300


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


async def measure(url_1, url_2, folder):
    one, two = await Client.open(url_1, "node-1-client"), await Client.open(url_2, "node-2-client")
    session = f"ahp-session:/{uuid.uuid4()}"
    await one.call("createSession", {"channel": session, "provider": "echo", "workingDirectories": [folder]})
    uri = f"{folder}/notes.txt"
    await file_reads(one, two, uri)  # warm-up: both nodes' database connections and layer subscriptions
    figures = dict(zip(("file same", "file other"), await file_reads(one, two, uri), strict=True))
    terminal = f"ahp-terminal:/{uuid.uuid4()}"
    await one.call("createTerminal", {"channel": terminal, "session": session})
    for client in (one, two):
        await client.call("subscribe", {"channel": terminal})
    await one.dispatch(terminal, {"type": "terminal/input", "data": "stty -echo; cat\n"})
    await asyncio.sleep(1)
    figures.update(zip(("keys same", "keys other"), await keystrokes(one, two, terminal), strict=True))
    for client in (one, two):
        await client.ws.close()
    return figures


def report(name, samples):
    print(f"{name:<44} p50 {percentile(samples, 0.5) * 1e3:8.2f} ms   p99 {percentile(samples, 0.99) * 1e3:8.2f} ms")
    return percentile(samples, 0.5)


def main():
    if not (os.environ.get("DATABASE_URL") and os.environ.get("REDIS_URL")):
        print("bench/nodes.py needs DATABASE_URL and REDIS_URL: two nodes share a database and a channel layer.")
        return
    with host_install() as (env, token):
        shared = os.path.join(env["AHP_VAR_DIR"], "workspaces")
        folder = os.path.join(shared, "bench", "project")
        os.makedirs(folder)
        with open(os.path.join(folder, "notes.txt"), "w") as notes:
            notes.write("a line of notes\n" * 20)
        secrets_key = Fernet.generate_key().decode()  # one for every node of the host
        nodes = [{**env, "AHP_WORKSPACE_ROOT": shared, "AHP_NODE_ID": name, "AHP_SECRETS_KEY": secrets_key,
                  "AHP_VAR_DIR": os.path.join(env["AHP_VAR_DIR"], name)} for name in ("node-1", "node-2")]
        port_1, port_2 = free_port(), free_port()
        with daphne("ahp.asgi:application", nodes[0], port_1), daphne("ahp.asgi:application", nodes[1], port_2):
            figures = asyncio.run(measure(f"ws://127.0.0.1:{port_1}/ahp?tkn={token}",
                                          f"ws://127.0.0.1:{port_2}/ahp?tkn={token}", f"file://{folder}"))
    same = report("resourceRead, on the session's home", figures["file same"])
    other = report("resourceRead, through the other node", figures["file other"])
    keys_same = report("terminal keystroke, on the session's home", figures["keys same"])
    keys_other = report("terminal keystroke, through the other node", figures["keys other"])
    print(f"resourceRead through the other node / on the home: {other / same:.2f}   (target <= 1.5)")
    print(f"terminal keystroke through the other node / on the home: {keys_other / keys_same:.2f}   (target <= 1.5)")


if __name__ == "__main__":
    main()
