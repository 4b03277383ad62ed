"""Who a sandbox's processes are: a user id of each sandbox's own, and a group id of each tenant's.

Numbers come from the operator's range (AHP_SANDBOX_IDS, "first-last") and belong to this
machine, as its processes do: a claim is a file `<AHP_SANDBOX_ID_FOLDER>/<number>` made with
O_EXCL, so two threads, processes or hosts on one machine never hand out one number. Both kinds
are recorded in the database, so every node uses the same numbers: a sandbox's user owns its
home on the volume every node mounts (homes.py), whichever node runs it, and is freed when the
sandbox ends (after everything running as it is killed); a tenant's group id is kept, since the
tenant's folders stay its group's.

The sandbox's own id keeps one session from signalling, tracing or starving another (process
limits count per user); the tenant's group lets a tenant's sessions share its folders and
nobody else's. Since nothing else runs as a sandbox's user, its end kills every process of the
user (`kill_user`)."""
import asyncio
import logging
import os
import subprocess
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from django.conf import settings
from django.db import connection

from .models import SandboxUser, TenantGroup

logger = logging.getLogger(__name__)

HELD_HERE = ("This machine holds sandbox identity {number} for another host; hosts whose nodes share machines "
             "need AHP_SANDBOX_IDS ranges of their own.")
RANGE_EXHAUSTED = "This host has no free sandbox identity left in AHP_SANDBOX_IDS; an operator must widen it."


class NoIdentity(RuntimeError):
    pass


def id_range() -> tuple[int, int]:
    first, _, last = settings.AHP_SANDBOX_IDS.partition("-")
    return int(first), int(last)


def _claims() -> Path:
    folder = Path(settings.AHP_SANDBOX_ID_FOLDER)
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    return folder


def _claim(holder: str, recorded: Iterable[int] = frozenset()) -> int:
    """A number of the range no one holds (on this machine, nor among `recorded`), now held by
    `holder` (a string kept for operators)."""
    claims = _claims()
    taken = {int(name) for name in os.listdir(claims) if name.isdigit()} | set(recorded)
    first, last = id_range()
    for number in range(first, last + 1):
        if number in taken:
            continue
        try:
            handle = os.open(claims / str(number), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            continue  # claimed since the listing
        os.write(handle, holder.encode())
        os.close(handle)
        return number
    raise NoIdentity(RANGE_EXHAUSTED)


def _release(number: int) -> None:
    try:
        os.unlink(_claims() / str(number))
    except FileNotFoundError:
        pass


_groups: dict[int, int] = {}  # tenant id -> its group id, as the database records it (it never changes)


def tenant_group(tenant_id: int) -> int:
    """The tenant's group id, recorded host-wide: the first node to need it claims a number
    free on its machine; a number another node's tenant holds already is kept claimed here
    (so never handed out again) and another is tried."""
    if tenant_id not in _groups:
        _groups[tenant_id] = _from_database(_recorded_group, tenant_id)
    return _groups[tenant_id]


def _recorded_group(tenant_id: int) -> int:
    recorded = TenantGroup.objects.filter(tenant_id=tenant_id).values_list("gid", flat=True)
    while (gid := recorded.first()) is None:
        number = _claim(f"tenant {tenant_id}")
        TenantGroup.objects.bulk_create([TenantGroup(tenant_id=tenant_id, gid=number)], ignore_conflicts=True)
        if recorded.first() not in (None, number):
            _release(number)  # another process recorded the tenant's first
    return gid


Argument = TypeVar("Argument")
Answer = TypeVar("Answer")


def _from_database(work: Callable[[Argument], Answer], argument: Argument) -> Answer:
    """`work(argument)`, which reads the database: at once, or from an event loop (a launch of an
    MCP server's, an agent's) in a thread of its own with its own connection."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return work(argument)
    with ThreadPoolExecutor(1) as reader:
        return reader.submit(_in_own_connection, work, argument).result()


def _in_own_connection(work: Callable[[Argument], Answer], argument: Argument) -> Answer:
    try:
        return work(argument)
    finally:
        connection.close()


_users: dict[str, int] = {}  # sandbox key -> its user id, as the database records it


def sandbox_user(key: str) -> int:
    """The sandbox's user id, recorded host-wide: every node runs the sandbox as one user, the
    owner of its home on the shared root (homes.py). The first node to need it claims a number
    free on its machine and in the database; a node that takes the sandbox over holds that
    number on its own machine too."""
    if key not in _users:
        _users[key] = _from_database(_recorded_user, key)
    return _users[key]


def existing_sandbox_user(key: str) -> int | None:
    return _from_database(_recorded_user_or_none, key)


def free_sandbox_user(key: str) -> None:
    number = _from_database(_forgotten_user, key)
    _users.pop(key, None)
    if number is not None:
        _release(number)


def _recorded_user(key: str) -> int:
    holder, recorded = f"sandbox {key}", SandboxUser.objects.filter(key=key).values_list("uid", flat=True)
    while (uid := recorded.first()) is None:
        taken = {*SandboxUser.objects.values_list("uid", flat=True), *TenantGroup.objects.values_list("gid", flat=True)}
        number = _claim(holder, taken)
        SandboxUser.objects.bulk_create([SandboxUser(key=key, uid=number)], ignore_conflicts=True)
        if recorded.first() != number:
            _release(number)  # another process recorded the sandbox's first, or took the number
    _hold(uid, holder)
    return uid


def _recorded_user_or_none(key: str) -> int | None:
    return SandboxUser.objects.filter(key=key).values_list("uid", flat=True).first()


def _forgotten_user(key: str) -> int | None:
    number = _recorded_user_or_none(key)
    SandboxUser.objects.filter(key=key).delete()
    return number


def _hold(number: int, holder: str) -> None:
    """This machine's claim of `number` names `holder`: made when missing, and taken over from a
    sandbox the database no longer gives it to (one ended on another node); a number this machine
    holds for anything else is refused."""
    claim = _claims() / str(number)
    try:
        handle = os.open(claim, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        held = claim.read_text()
        if held == holder:
            return
        former = held.removeprefix("sandbox ")
        if former == held or SandboxUser.objects.filter(key=former, uid=number).exists():
            raise NoIdentity(HELD_HERE.format(number=number)) from None
        claim.write_text(holder)
        return
    os.write(handle, holder.encode())
    os.close(handle)


def processes_of(uid: int) -> list[int]:
    """The pids of every process running as `uid` on this machine."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/status") as status:
                line = next(line for line in status if line.startswith("Uid:"))
        except (OSError, StopIteration):
            continue
        if int(line.split()[1]) == uid:
            found.append(int(pid))
    return found


def kill_user(uid: int) -> bool:
    """Every process of `uid` killed: `kill -1` run as that user signals all of them at once, so
    a stopped process, a fork loop or a child that left its session cannot outlive it."""
    for _ in range(20):
        subprocess.run(["/usr/bin/setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "/bin/kill",
                        "-KILL", "-1"], capture_output=True, timeout=10)
        if not processes_of(uid):
            return True
        time.sleep(0.05)
    logger.warning("Processes of sandbox user %s are still running.", uid)
    return False
