"""A tenant whose agents' tool calls take long (a command in a computer may run for a minute)
holds up its own further calls, never another tenant's: host tools' bodies run on threads of
their own, at most a few of one tenant's at once."""
import threading
import time

import pytest

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


OVERRAN = "hang did not finish within 0.5 seconds, so the host stopped waiting for it."


@pytest.fixture
def hang(monkeypatch):
    """A plugin tool `hang` whose body blocks until the event answered is set; host tools' deadline 0.5 s."""
    monkeypatch.setattr(TOOL_THREADS, "deadline", 0.5)
    released = threading.Event()

    def hang(context, arguments):
        released.wait(60)
        return "released"

    PLUGINS.set_tools([Tool("hang", executor=hang)])
    try:
        yield released
    finally:
        released.set()
        PLUGINS.set_tools([])
        deadline = time.monotonic() + 10  # the abandoned bodies return and are forgotten
        while TOOL_THREADS.abandoned and time.monotonic() < deadline:
            time.sleep(0.05)


def test_a_host_tool_that_never_returns_fails_its_call_and_gives_back_its_tenants_slot(acme, host, hang,
                                                                                       monkeypatch):
    monkeypatch.setattr(TOOL_THREADS, "per_tenant", 2)
    with AhpClient(host.port, acme.tokens["member"], "alice") as alice:
        chat = default_chat(alice, alice.create_session())
        alice.subscribe(chat)
        # More overrunning calls than the tenant's slots: each fails at its deadline and gives
        # its slot back, so the next one runs; none waits for a hung body.
        for _ in range(TOOL_THREADS.per_tenant + 1):
            assert alice.reply_to(alice.start_turn(chat, "/call hang {}"), timeout=10) == OVERRAN
        assert TOOL_THREADS.abandoned == TOOL_THREADS.per_tenant + 1
        assert '"sessions"' in alice.reply_to(alice.start_turn(chat, "/call list_sessions {}"), timeout=10)
        hang.set()
        deadline = time.monotonic() + 10
        while TOOL_THREADS.abandoned and time.monotonic() < deadline:
            time.sleep(0.05)
        assert TOOL_THREADS.abandoned == 0


def test_once_the_spare_threads_are_taken_a_hanging_tool_stalls_only_its_own_tenant(acme, globex, host, hang,
                                                                                    monkeypatch):
    monkeypatch.setattr(TOOL_THREADS, "per_tenant", 1)
    monkeypatch.setattr(TOOL_THREADS, "abandoned_at_most", 1)
    with AhpClient(host.port, acme.tokens["member"], "alice") as alice:
        chat = default_chat(alice, alice.create_session())
        alice.subscribe(chat)
        # The first is abandoned to the one spare thread; the second keeps acme's one slot.
        assert alice.reply_to(alice.start_turn(chat, "/call hang {}"), timeout=10) == OVERRAN
        assert alice.reply_to(alice.start_turn(chat, "/call hang {}"), timeout=10) == OVERRAN
        waiting = alice.start_turn(chat, "/call list_sessions {}")
        with AhpClient(host.port, globex.tokens["member"], "gus") as gus:
            other = default_chat(gus, gus.create_session())
            gus.subscribe(other)
            assert '"sessions"' in gus.reply_to(gus.start_turn(other, "/call list_sessions {}"), timeout=10)
        with pytest.raises(AssertionError, match="no chat/responsePart"):
            alice.reply_to(waiting, timeout=1)  # acme's call waits for acme's slot
        hang.set()  # the hung bodies return: acme's slot is free again
        assert '"sessions"' in alice.reply_to(waiting, timeout=10)
