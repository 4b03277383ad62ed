"""The first process inside a sandbox (standard library only: it runs on the host's Python,
bound read-only, before anything of the tenant's).

It listens on 127.0.0.1:<port> inside the sandbox's own network namespace and carries each
connection to the host's forwarding proxy through the Unix socket bound into the sandbox, so
HTTP(S)_PROXY pointing there is the sandbox's only way out. It applies the resource limits,
starts the command with the same standard streams, and ends when the command ends or when the
host removes the session's `alive` marker (the session is gone), killing what the command left.

    bridge.py --alive FILE [--proxy SOCKET --port N] [--limit NAME=VALUE ...] -- COMMAND...
"""
import os
import resource
import signal
import socket
import subprocess
import sys
import threading
from typing import Any

LIMITS = {
    "cpu": resource.RLIMIT_CPU,
    "as": resource.RLIMIT_AS,
    "nproc": resource.RLIMIT_NPROC,
    "nofile": resource.RLIMIT_NOFILE,
    "fsize": resource.RLIMIT_FSIZE,
}


def pipe(source: socket.socket, target: socket.socket) -> None:
    try:
        while chunk := source.recv(65536):
            target.sendall(chunk)
    except OSError:
        pass
    finally:
        for end in (source, target):
            try:
                end.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def carry(inside: socket.socket, proxy_path: str) -> None:
    outside = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        outside.connect(proxy_path)
    except OSError:
        inside.close()
        outside.close()
        return
    threading.Thread(target=pipe, args=(outside, inside), daemon=True).start()
    pipe(inside, outside)
    inside.close()
    outside.close()


def listen(port: int, proxy_path: str) -> None:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", port))
    server.listen(64)

    def accept() -> None:
        while True:
            inside, _ = server.accept()
            threading.Thread(target=carry, args=(inside, proxy_path), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()


def apply_limits(limits: dict[str, int]) -> None:
    os.umask(0o002)  # what the command makes in a tenant's folder stays writable by the tenant's other sessions
    for name, value in limits.items():
        resource.setrlimit(LIMITS[name], (value, value))


def parse(argv: list[str]) -> tuple[dict[str, Any], list[str]]:
    options: dict[str, Any] = {"limits": {}}
    while argv and argv[0] != "--":
        flag, value, argv = argv[0], argv[1], argv[2:]
        if flag == "--limit":
            name, _, number = value.partition("=")
            options["limits"][name] = int(number)
        else:
            options[flag.lstrip("-")] = value
    return options, argv[1:]


def main(argv: list[str]) -> int:
    options, command = parse(argv)
    if options.get("proxy"):
        listen(int(options["port"]), options["proxy"])
    child = subprocess.Popen(command, preexec_fn=lambda: apply_limits(options["limits"]))
    alive = options["alive"]
    while True:
        try:
            code = child.wait(timeout=0.25)  # returns the moment the command ends
            return code if code >= 0 else 128 - code
        except subprocess.TimeoutExpired:
            if not os.path.exists(alive):
                child.send_signal(signal.SIGKILL)
                child.wait()
                return 137


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
