"""A tenant whose agents' tool calls take long (a command in a computer may run for a minute)
holds up its own further calls, never another tenant's: host tools' bodies run on threads of
their own, at most a few of one tenant's at once."""
import threading
import time

from tools_app.catalog.host_tools import PLUGINS
from tools_app.catalog.registry import Tool
from tools_app.tool_threads import TOOL_THREADS

from ..ahp.protocol.harness import AhpClient, default_chat

# More than any default executor's threads (asyncio's: at most 32), which held them all before.
HOLDING_CALLS = 40


def test_one_tenants_long_tool_calls_leave_another_tenants_calls_running(acme, globex, host):
    released = threading.Event()
    holding = []

    def hold(context, arguments):
        holding.append(context.session.tenant_id)
        released.wait(60)
        return "released"

    PLUGINS.set_tools([Tool("hold", executor=hold)])
    try:
        with AhpClient(host.port, acme.tokens["member"], "alice") as alice:
            turns = []
            for _ in range(HOLDING_CALLS):
                chat = default_chat(alice, alice.create_session())
                alice.subscribe(chat)
                turns.append(alice.start_turn(chat, "/call hold {}"))
            deadline = time.monotonic() + 20
            while len(holding) < TOOL_THREADS.per_tenant and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(0.5)  # had more of acme's calls been let through, they would be holding by now
            # acme's calls hold as many threads as one tenant may, and the rest wait their turn ...
            assert len(holding) == TOOL_THREADS.per_tenant
            with AhpClient(host.port, globex.tokens["member"], "gus") as gus:
                chat = default_chat(gus, gus.create_session())
                gus.subscribe(chat)
                started = time.monotonic()
                # ... while globex's host tool answers as on a quiet host.
                listed = gus.reply_to(gus.start_turn(chat, "/call list_sessions {}"), timeout=10)
                assert '"sessions"' in listed and time.monotonic() - started < 5
            released.set()
            assert [alice.reply_to(turn, timeout=30) for turn in turns] == ["released"] * HOLDING_CALLS
            assert len(holding) == HOLDING_CALLS
    finally:
        released.set()
        PLUGINS.set_tools([])
