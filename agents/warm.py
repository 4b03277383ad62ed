"""The harness processes this serving process keeps warm between a chat's turns.

A provider takes a chat's running harness for a turn (`take`) or starts one, and hands it back
when the turn ended cleanly (`keep`); a turn that failed stops its harness instead. Warm
processes are bounded per process (per node, with one serving process): an idle time
(AHP_HARNESS_IDLE_SECONDS), a count (AHP_HARNESS_WARM_MAX) and the memory they hold in all
(AHP_HARNESS_WARM_MEMORY_MB), the least recently used stopped first. A stopped chat's next turn
starts its harness cold and resumes the conversation from durable state; nothing is lost.

A harness belongs to the event loop it was started on (its SDK's streams do): only turns on the
process's serving loop (`serve_on`) keep theirs; a turn on a loop of its own (a worker's) runs
cold and stops its harness at its end.
"""
import asyncio
import hashlib
import json
import logging
import os
import uuid
from collections import OrderedDict, deque
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, AsyncIterator, Awaitable, Callable, Generic, Protocol, TypeVar

from django.conf import settings

if TYPE_CHECKING:
    from sandbox.bubblewrap import Sandbox

logger = logging.getLogger(__name__)


class Harness(Protocol):
    """A provider's running harness: its process and how it stops."""

    @property
    def pid(self) -> int | None: ...

    def alive(self) -> bool: ...

    async def stop(self) -> None: ...


def launch_digest(*fixed: Any) -> str:
    """A digest of what a harness is started with: turns with the same one can share its process."""
    return hashlib.sha256(json.dumps(fixed, sort_keys=True, default=str).encode()).hexdigest()


def sandbox_fields(sandbox: "Sandbox") -> tuple:
    """What a harness's sandbox is opened with (not its outbound rule, a function)."""
    return (sandbox.key, sandbox.tenant_id, sandbox.writable, sandbox.read_only, sandbox.destinations,
            sandbox.host_destinations, sandbox.limit_overrides, sandbox.host_writable, sandbox.stand_ins)


NO_TURN = "No turn of this chat is running."


class CurrentTurn:
    """What a warm harness's callbacks reach (they are bound when it starts): the turn it answers
    now, its `agents` (which attribute and run each tool call) and its permission asker."""

    def __init__(self, refused: Any) -> None:
        self.refused = refused  # the permission answer while no turn runs
        self.agents: Any = None
        self.asks: Callable | None = None

    def begin(self, agents: Any, asks: Callable) -> None:
        self.agents, self.asks = agents, asks

    def end(self) -> None:
        self.agents = self.asks = None

    async def answer(self, name: str, arguments: dict, caller: str | None) -> tuple[str, bool]:
        """A tool call by `caller` (the SDK's name for the agent or call that made it)."""
        if self.agents is None:
            return NO_TURN, True
        return await self.agents.answer(name, arguments, caller)

    async def ask(self, *request: Any) -> Any:
        """A permission request, in the SDK's own arguments."""
        return self.refused if self.asks is None else await self.asks(*request)


H = TypeVar("H", bound=Harness)


@dataclass
class Launch(Generic[H]):
    """How a chat's harness is started for a turn: what with (`key`), the turn's agents and
    permission asker, and `start`, which starts it (its last words in `stderr`, where it has them)."""

    key: str
    agents: Any
    asks: Callable
    start: Callable[[], Awaitable[H]]
    stderr: deque = field(default_factory=deque)


@dataclass
class Warm:
    harness: Harness
    session_id: str
    launch: str  # what the harness was started with; a turn needing another restarts it
    loop: asyncio.AbstractEventLoop
    memory: int = 0  # bytes its processes held at its last turn's end
    idle: asyncio.TimerHandle | None = field(default=None, repr=False)


def child_pids(pid: int) -> list[int]:
    """The processes `pid` started, from its threads' /proc children lists."""
    found: list[int] = []
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:  # it ended
        return found
    for thread in threads:
        try:
            with open(f"/proc/{pid}/task/{thread}/children") as children:
                found.extend(int(child) for child in children.read().split())
        except OSError:
            continue
    return found


def tree_memory(pid: int | None) -> int:
    """Resident bytes of `pid` and every process below it (the sandbox's launcher, the CLI, what it
    started). It runs at every warm turn's end: it reads the tree's own /proc entries, not every
    process of the node's."""
    if pid is None:
        return 0
    total, pending = 0, [pid]
    while pending:
        current = pending.pop()
        pending.extend(child_pids(current))
        try:
            with open(f"/proc/{current}/statm") as statm:
                total += int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except OSError:
            continue
    return total


class WarmHarnesses:
    """Warm harnesses by (provider, chat id), least recently used first. A harness in use by a
    turn is not here: `take` hands it out, `keep` puts it back."""

    def __init__(self) -> None:
        self.warm: OrderedDict[tuple[str, str], Warm] = OrderedDict()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.warming: dict[tuple[str, str], asyncio.Event] = {}  # chats whose harness is being pre-warmed

    def serve_on(self, loop: asyncio.AbstractEventLoop) -> None:
        """Turns on `loop` (this process's serving loop) keep their harnesses warm."""
        self.loop = loop

    def keeps_warm(self) -> bool:
        """Whether a turn running now may keep its harness for the chat's next turn."""
        return self.loop is not None and asyncio.get_running_loop() is self.loop

    @asynccontextmanager
    async def prewarming(self, provider: str, chat_id: uuid.UUID | str) -> AsyncIterator[bool]:
        """While the chat's harness is pre-warmed, its turns wait for it (one process, not two);
        yields False when the chat has one, warm or being warmed, already. Entered before the
        pre-warm awaits anything, so a turn arriving at once finds it."""
        key = (provider, str(chat_id))
        if key in self.warm or key in self.warming:
            yield False
            return
        self.warming[key] = asyncio.Event()
        try:
            yield True
        finally:
            self.warming.pop(key).set()

    async def take(self, provider: str, chat_id: uuid.UUID | str, launch: str, kind: type[H]) -> H | None:
        """The chat's warm harness (a `kind`) if it runs and was started with `launch`, now the
        turn's; else None (a stale one is stopped: the turn starts its own)."""
        if not self.keeps_warm():
            return None
        if (provider, str(chat_id)) in self.warming:
            await self.warming[(provider, str(chat_id))].wait()
        warm = self.warm.pop((provider, str(chat_id)), None)
        if warm is None:
            return None
        if warm.idle is not None:
            warm.idle.cancel()
        if warm.launch == launch and isinstance(warm.harness, kind) and warm.harness.alive():
            return warm.harness
        # Its tools, instructions or sandbox changed (or it died): those are fixed at its start.
        await warm.harness.stop()
        return None

    async def keep(self, provider: str, chat_id: uuid.UUID | str, session_id: uuid.UUID | str, launch: str, harness: Harness) -> None:
        """The turn ended cleanly: `harness` stays warm for the chat's next turn, within the bounds;
        off the serving loop it stops."""
        if not self.keeps_warm() or not harness.alive():
            await harness.stop()
            return
        key, loop = (provider, str(chat_id)), asyncio.get_running_loop()
        if key in self.warm:  # a turn that began while its chat's harness was still busy started another
            await self.evict(*key)
        warm = Warm(harness, str(session_id), launch, loop, memory=tree_memory(harness.pid))
        warm.idle = loop.call_later(settings.AHP_HARNESS_IDLE_SECONDS, lambda: loop.create_task(self.evict(*key)))
        self.warm[key] = warm
        await self.bound()

    async def bound(self) -> None:
        """The least recently used harnesses stop while there are too many or they hold too much."""
        memory_cap = settings.AHP_HARNESS_WARM_MEMORY_MB * 1024 * 1024
        while self.warm and (len(self.warm) > settings.AHP_HARNESS_WARM_MAX
                             or sum(w.memory for w in self.warm.values()) > memory_cap):
            key = next(iter(self.warm))
            logger.info("Stopped the warm %s harness of chat %s: the node's bound on warm harnesses.", *key)
            await self.evict(*key)

    async def evict(self, provider: str, chat_id: uuid.UUID | str) -> None:
        """The chat's warm harness stops (its next turn starts cold and resumes the conversation)."""
        warm = self.warm.pop((provider, str(chat_id)), None)
        if warm is None:
            return
        if warm.idle is not None:
            warm.idle.cancel()
        await warm.harness.stop()

    def evict_session(self, session_id: str) -> None:
        """The session ended: its chats' warm harnesses stop (called from any thread)."""
        loop = self.loop
        if loop is None or loop.is_closed():
            return
        stopping = self.stop_session(str(session_id))
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            loop.create_task(stopping)
        else:
            asyncio.run_coroutine_threadsafe(stopping, loop)

    async def stop_session(self, session_id: str) -> None:
        for key in [key for key, warm in self.warm.items() if warm.session_id == session_id]:
            await self.evict(*key)

    async def stop_all(self) -> None:
        for key in list(self.warm):
            await self.evict(*key)

    def chats(self) -> list[tuple[str, str]]:
        """(provider, chat id) of each warm harness, least recently used first."""
        return list(self.warm)


WARM = WarmHarnesses()
