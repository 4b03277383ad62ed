"""Who a sandbox's processes are: a user id of each sandbox's own, and a group id of each tenant's.

Numbers come from the operator's range (AHP_SANDBOX_IDS, "first-last") and belong to this
machine, as its processes do: a claim is a file `<AHP_SANDBOX_ID_FOLDER>/<number>` made with
O_EXCL, so two threads, processes or hosts on one machine never hand out one number. A sandbox's user id is freed
when the sandbox ends (after everything running as it is killed); a tenant's group id is kept,
since the tenant's folders stay its group's, and recorded in the database, so every node's
sandboxes of the tenant share the folders on a volume they all mount.

The sandbox's own id keeps one session from signalling, tracing or starving another (process
limits count per user); the tenant's group lets a tenant's sessions share its folders and
nobody else's."""
import asyncio
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from django.conf import settings
from django.db import connection

from .models import TenantGroup

RANGE_EXHAUSTED = "This host has no free sandbox identity left in AHP_SANDBOX_IDS; an operator must widen it."


class NoIdentity(RuntimeError):
    pass


def id_range() -> tuple[int, int]:
    first, _, last = settings.AHP_SANDBOX_IDS.partition("-")
    return int(first), int(last)


def _folder(name: str) -> Path:
    folder = Path(settings.VAR_DIR) / "sandboxes" / name
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    return folder


def _claims() -> Path:
    folder = Path(settings.AHP_SANDBOX_ID_FOLDER)
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    return folder


def _claim(holder: str) -> int:
    """A number of the range no one holds, now held by `holder` (a string kept for operators)."""
    claims = _claims()
    taken = {int(name) for name in os.listdir(claims) if name.isdigit()}
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


def _recorded(record: Path, holder: str) -> int:
    """The number written in `record`, claiming one for `holder` when there is none yet (the
    first writer wins: the record is linked into place, never overwritten)."""
    try:
        return int(record.read_text())
    except FileNotFoundError:
        pass
    number = _claim(holder)
    draft = record.with_name(f".{record.name}.{number}")
    draft.write_text(str(number))
    try:
        os.link(draft, record)
    except FileExistsError:
        _release(number)
        number = int(record.read_text())
    finally:
        draft.unlink()
    return number


_groups: dict[int, int] = {}  # tenant id -> its group id, as the database records it (it never changes)


def tenant_group(tenant_id: int) -> int:
    """The tenant's group id, recorded host-wide: the first node to need it claims a number
    free on its machine; a number another node's tenant holds already is kept claimed here
    (so never handed out again) and another is tried."""
    if tenant_id not in _groups:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            _groups[tenant_id] = _recorded_group(tenant_id)
        else:  # a launch from an event loop (an MCP server's, an agent's): once per tenant and process
            with ThreadPoolExecutor(1) as reader:
                _groups[tenant_id] = reader.submit(_in_own_connection, _recorded_group, tenant_id).result()
    return _groups[tenant_id]


def _recorded_group(tenant_id: int) -> int:
    recorded = TenantGroup.objects.filter(tenant_id=tenant_id).values_list("gid", flat=True)
    while (gid := recorded.first()) is None:
        number = _claim(f"tenant {tenant_id}")
        TenantGroup.objects.bulk_create([TenantGroup(tenant_id=tenant_id, gid=number)], ignore_conflicts=True)
        if recorded.first() not in (None, number):
            _release(number)  # another process recorded the tenant's first
    return gid


def _in_own_connection(work: Callable[[int], int], tenant_id: int) -> int:
    try:
        return work(tenant_id)
    finally:
        connection.close()


def sandbox_user(key: str) -> int:
    return _recorded(_folder("users") / key, f"sandbox {key}")


def existing_sandbox_user(key: str) -> int | None:
    try:
        return int((_folder("users") / key).read_text())
    except FileNotFoundError:
        return None


def free_sandbox_user(key: str) -> None:
    record = _folder("users") / key
    try:
        number = int(record.read_text())
    except FileNotFoundError:
        return
    record.unlink()
    _release(number)
