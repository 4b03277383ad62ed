"""A normal run of `runhost` (what `make run` calls) prints no traceback and no error line: a
session with turns on each provider this machine can run (echo always; claude and github-copilot
against the scripted model when their CLIs are installed), the admin and its static files, the
REST schema, the session's MCP endpoint, an oversized PATCH, then Ctrl-C."""
import json
import re
import subprocess
import sys
import threading

import httpx
import pytest

from agents.harness import claude_cli, copilot_cli

from .agents.model_server import ModelServer
from .ahp.mcp.helpers import tools_endpoint, wait_until, with_mcp
from .ahp.protocol.harness import AhpClient, default_chat
from .conftest import PROCESS_DEADLINE_SECONDS, ROOT, free_port
from .test_runhost import embedded_env, interrupt, start

pytestmark = pytest.mark.e2e


def providers():
    return ["echo", *(["claude"] if claude_cli() else []), *(["github-copilot"] if copilot_cli() else [])]


def worker_seen(port):
    try:
        return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=10).json().get("workerSeen")
    except httpx.HTTPError:
        return False


def run_turns(port, token, provider):
    with AhpClient(port, token, "terminal") as alice:
        session = alice.create_session(provider=provider)
        chat = default_chat(alice, session)
        alice.subscribe(chat)
        for text in ("hello", "again"):
            assert alice.reply_to(alice.start_turn(chat, text), timeout=120)
    return session


def test_a_normal_run_prints_no_traceback_and_no_error(tmp_path):
    with ModelServer() as model:
        env = {**embedded_env(tmp_path), "ANTHROPIC_BASE_URL": model.url, "ANTHROPIC_API_KEY": "test-key",
               "AHP_COPILOT_BASE_URL": f"{model.url}/v1", "AHP_COPILOT_API_KEY": "test-key",
               "AHP_OUTBOUND_ALLOW": "127.0.0.1"}
        subprocess.run([sys.executable, "manage.py", "migrate", "--no-input"], env=env, cwd=ROOT, check=True,
                       capture_output=True)
        port = free_port()
        host = start(env, port)
        output, lingering = [], None
        reader = threading.Thread(target=lambda: output.extend(host.stdout), daemon=True)
        try:
            while "connect a client" not in "".join(output) and host.poll() is None:
                output.append(host.stdout.readline())
            reader.start()
            banner = "".join(output)
            token = re.search(r"connection token:\s+(\S+)", banner).group(1)
            password = re.search(r"user admin\s+password (\S+)", banner).group(1)
            # The front answers at once; the serving process it hands sockets to may still be starting.
            wait_until(lambda: worker_seen(port), timeout=PROCESS_DEADLINE_SECONDS,
                       describe="the host serving with its worker")
            for provider in providers():
                session = run_turns(port, token, provider)
            endpoint = tools_endpoint(port, token, session).json()
            with_mcp(endpoint["url"], endpoint["token"], lambda mcp: mcp.list_tools())
            base = f"http://127.0.0.1:{port}"
            with httpx.Client(base_url=base, timeout=PROCESS_DEADLINE_SECONDS) as http:
                assert http.get("/api/v1/schema/").status_code == 200
                login = http.get("/admin/login/")
                csrf = http.cookies["csrftoken"]
                http.post("/admin/login/", data={"username": "admin", "password": password,
                                                 "csrfmiddlewaretoken": csrf, "next": "/admin/"},
                          headers={"Referer": f"{base}/admin/login/"})
                page = http.get("/admin/").text
                for static in re.findall(r'(?:href|src)="(/static/[^"]+)"', login.text + page):
                    assert http.get(static).status_code == 200
                big = http.patch("/api/v1/config", content=json.dumps({"mcpServers": {"x" * 2_700_000: {}}}),
                                 headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
                assert big.status_code == 413
                assert big.json() == {"error": "The request body is over the 2.5 MiB the host accepts; send less at a time."}
            # A client still subscribed when Ctrl-C comes: the host's last news for it finds it gone.
            lingering = AhpClient(port, token, "lingering")
            lingering.subscribe(session)
        finally:
            rest = interrupt(host) if host.poll() is None else ""
            if lingering is not None:
                lingering.close()
            reader.join(timeout=PROCESS_DEADLINE_SECONDS)
            print("".join(output) + rest)  # shown when the test fails
    printed = "".join(output) + rest
    assert "Traceback" not in printed, printed
    assert "Error" not in printed, printed
