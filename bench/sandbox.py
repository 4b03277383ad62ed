"""What the sandbox costs: starting a command in a session's sandbox against starting it
directly, and one HTTP request through the sandbox's forwarding proxy against the same request
made directly, each measured in the same run.

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
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True)
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


def main():
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ahp.settings")
    django.setup()
    from sandbox.bubblewrap import Sandbox, end_sandbox

    key = f"bench-{uuid.uuid4().hex[:8]}"
    port = web_server()
    plain = Sandbox(key, read_only=(sys.prefix,))
    reaching = Sandbox(key, read_only=(sys.prefix,), host_destinations=(("127.0.0.1", port),))
    url = f"http://127.0.0.1:{port}/"
    try:
        rows = [
            ("/bin/true", timed(["/bin/true"]), timed(plain.argv(["/bin/true"]))),
            ("python -c pass", timed([sys.executable, "-c", "pass"]), timed(plain.argv([sys.executable, "-c", "pass"]))),
            ("python: one GET", timed([sys.executable, "-c", FETCH, url]),
             timed(reaching.argv([sys.executable, "-c", FETCH, url]))),
        ]
    finally:
        end_sandbox(key)
    print(f"{'command':<18}{'direct ms':>12}{'sandboxed ms':>15}{'ratio':>8}   (median of {RUNS})")
    for name, direct, boxed in rows:
        print(f"{name:<18}{direct:>12.1f}{boxed:>15.1f}{boxed / direct:>8.2f}")


if __name__ == "__main__":
    main()
