"""A session's home: the host process (on one node) where its files and processes are touched
and its turns run. The process that makes the session (or first serves such a request for it)
takes it; another takes it over only once that process stopped renewing its lease (it died, or
its node did)."""
import uuid
from datetime import timedelta
from typing import Any

from channels.layers import InMemoryChannelLayer, get_channel_layer
from django.db import transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from kernel.orm import database_sync_to_async
from kernel.outbox import send_soon

from ..events.log import PROCESS, this_node
from ..events.sockets import HEARTBEAT_SECONDS
from ..models import HostProcess, SessionHome, Turn
from .presence import live_processes
from .turns import do_end_abandoned_turn

# What a process is sent to end what it runs of a session or terminal gone (tools_app.sessions: end_here).
ENDED_HERE = "ahp.home_end"
# A home that renewed its lease within this is alive: three heartbeats, so one slow renewal
# moves no session.
LEASE_SECONDS = 3 * HEARTBEAT_SECONDS


def home_channel(process: str) -> str:
    """The channel-layer channel a process hears its sessions' requests on (ahp.protocol.homes)."""
    return f"ahp.home.{process}"


def shared_layer() -> bool:
    """Whether other processes are reachable: without Redis, every request runs where it arrives."""
    return not isinstance(get_channel_layer(), InMemoryChannelLayer)


def alive(process: str) -> bool:
    cutoff = timezone.now() - timedelta(seconds=LEASE_SECONDS)
    return HostProcess.objects.filter(name=process, seen__gte=cutoff).exists()


def home_of(session_id: Any) -> str | None:
    """The process recorded as the session's home, alive or not (None: it never had one)."""
    return SessionHome.objects.filter(session_id=session_id).values_list("process", flat=True).first()


def ended_elsewhere(process: str | None, message: dict) -> bool:
    """Whether what `message` ends (ENDED_HERE: shells, a session's processes) is sent to end in
    `process`, another live process that runs it. False: this process ends it itself (it runs
    it, or no other process is reachable, or the one that ran it is gone and its processes with
    it). Called after commit."""
    if process is None or process == PROCESS or not shared_layer() or not alive(process):
        return False

    async def send() -> None:
        await get_channel_layer().send(home_channel(process), {**message, "type": ENDED_HERE})

    send_soon(f"the end of {message} to {process}", send)
    return True


@transaction.atomic
def do_find_home(session_id: str, process: str = PROCESS, lease_seconds: float = LEASE_SECONDS) -> str:
    """The process running `session_id`: its home's while that one's lease holds, else `process`,
    which takes the home now. The session's turns whose agent ran on a process gone since end
    then and there (the sweep's sentence, RUNNER_GONE), so its chat takes a new turn at once."""
    cutoff = timezone.now() - timedelta(seconds=lease_seconds)
    found = (SessionHome.objects.filter(session_id=session_id)
             .annotate(alive=Exists(HostProcess.objects.filter(name=OuterRef("process"), seen__gte=cutoff)))
             .values_list("process", "alive").first())
    if found is not None and (found[0] == process or found[1]):
        return found[0]
    if found is None:
        SessionHome.objects.bulk_create([SessionHome(session_id=session_id, process=process, node=this_node())],
                                        ignore_conflicts=True)
    else:
        SessionHome.objects.filter(session_id=session_id, process=found[0]).update(
            process=process, node=this_node(), since=timezone.now())
    home = SessionHome.objects.filter(session_id=session_id).values_list("process", flat=True).first()
    if home == process and found is not None:
        live = [*live_processes(cutoff), process]
        for turn_id in (Turn.objects.filter(chat__session_id=session_id, state="active").exclude(runner__in=live)
                        .values_list("id", flat=True)):
            do_end_abandoned_turn(turn_id, live)
    return home or process


@transaction.atomic
def do_hand_turn_home(turn_id: uuid.UUID | str) -> str | None:
    """The live home, when it is not this process, of the session of the turn this process was
    to run (one a tool, a wakeup or a queued message began): the turn becomes that home's to run
    (its lease is the home's). None: it runs here."""
    session_id = Turn.objects.filter(pk=turn_id).values_list("chat__session_id", flat=True).first()
    if session_id is None:
        return None
    home = SessionHome.objects.filter(session_id=session_id).values_list("process", flat=True).first()
    if home is None or home == PROCESS or not alive(home):
        return None
    return home if Turn.objects.filter(pk=turn_id, state="active", runner=PROCESS).update(runner=home) else None


async def handed_home(turn_id: uuid.UUID | str) -> bool:
    """Whether the turn went to its session's home, another process, to run there (the home's
    ahp.protocol.homes runs it)."""
    if not shared_layer():
        return False
    home = await database_sync_to_async(do_hand_turn_home)(turn_id)
    if home is None:
        return False
    await get_channel_layer().send(home_channel(home), {"type": "ahp.home_turn", "turn_id": str(turn_id)})
    return True
