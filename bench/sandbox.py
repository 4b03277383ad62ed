"""What the sandbox costs: starting a command in a session's sandbox against starting it
directly, one HTTP request through the sandbox's forwarding proxy against the same request made
directly, and a file command's read (beneath the workspace root through no link, as the
session's identity) against a read by name, each measured in the same run.

Run: `.venv/bin/python -m bench.sandbox` (as root, bubblewrap installed).
"""
import http.server
import os
import statistics
import subprocess
import sys
import threading
import time
import uuid

import django

RUNS = 20
FETCH = "import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=10).read()"


def timed(command, runs=RUNS):
    """Median ms of running the command `command()` builds (a sandboxed launch's command line is
    built for each run: its environment file goes as it starts)."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(command(), check=True, capture_output=True)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def web_server():
    class Ok(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Ok)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server.server_address[1]


def file_reads(key, runs=2000):
    """(ms a 4 KiB read by name takes, ms a file command's read takes): medians of `runs`."""
    import shutil

    from sandbox.beneath import as_identity, open_beneath, open_root
    from sandbox.bubblewrap import Sandbox
    from sandbox.workspaces import host_root, relative_to_host_root

    folder = host_root() / key
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "file.txt"
    path.write_bytes(b"x" * 4096)
    owner = Sandbox(key).owner()

    def by_name():
        with open(path, "rb") as handle:
            handle.read()

    def beneath():
        root = open_root(str(host_root()))
        try:
            with as_identity(*owner):
                fd = open_beneath(root, relative_to_host_root(str(path)), os.O_RDONLY | os.O_NONBLOCK)
                with os.fdopen(fd, "rb") as handle:
                    handle.read()
        finally:
            os.close(root)

    try:
        return [statistics.median(timed_call(work) for _ in range(runs)) for work in (by_name, beneath)]
    finally:
        shutil.rmtree(folder)


def timed_call(work):
    start = time.perf_counter()
    work()
    return (time.perf_counter() - start) * 1000


def main():
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ahp.settings")
    django.setup()
    from django.core.management import call_command

    from sandbox.bubblewrap import Sandbox, end_sandbox

    call_command("migrate", verbosity=0, interactive=False)  # a sandbox's user is recorded in the database

    key = f"bench-{uuid.uuid4().hex[:8]}"
    port = web_server()
    plain = Sandbox(key, read_only=(sys.prefix,))
    reaching = Sandbox(key, read_only=(sys.prefix,), host_destinations=(("127.0.0.1", port),))
    url = f"http://127.0.0.1:{port}/"
    try:
        rows = [
            ("/bin/true", timed(lambda: ["/bin/true"]), timed(lambda: plain.argv(["/bin/true"]))),
            ("python -c pass", timed(lambda: [sys.executable, "-c", "pass"]),
             timed(lambda: plain.argv([sys.executable, "-c", "pass"]))),
            ("python: one GET", timed(lambda: [sys.executable, "-c", FETCH, url]),
             timed(lambda: reaching.argv([sys.executable, "-c", FETCH, url]))),
            ("file read 4 KiB", *file_reads(key)),
        ]
    finally:
        end_sandbox(key)
    print(f"{'command':<18}{'direct ms':>12}{'sandboxed ms':>15}{'ratio':>8}   (median of {RUNS})")
    for name, direct, boxed in rows:
        print(f"{name:<18}{direct:>12.3f}{boxed:>15.3f}{boxed / direct:>8.2f}")


if __name__ == "__main__":
    main()
