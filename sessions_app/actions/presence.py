"""The presence of processes and connections: a live process marks itself and its sockets as
still alive; what a dead one leased (its turns) the sweep ends."""
import uuid
from collections.abc import Iterable
from datetime import datetime

from django.db.models import QuerySet
from django.utils import timezone

from ..events.log import this_node
from ..models import ClientConnection, HostProcess


def do_mark_connections_seen(process: str, connection_ids: Iterable[uuid.UUID | str]) -> int:
    """Refresh `seen` on `process`'s rows of the sockets still open there, so the sweep tells a
    live process from a dead one. Publishes nothing."""
    return ClientConnection.objects.filter(process=process, id__in=connection_ids).update(seen=timezone.now())


def do_mark_process_alive(process: str) -> None:
    """Renew the lease `process` holds on its turns and terminals. Publishes nothing."""
    now = timezone.now()
    if not HostProcess.objects.filter(name=process).update(seen=now):
        HostProcess.objects.update_or_create(name=process, defaults={"seen": now, "node": this_node()})


def live_processes(since: datetime) -> "QuerySet[HostProcess, str]":
    """Names of the processes seen since `since`."""
    return HostProcess.objects.filter(seen__gte=since).values_list("name", flat=True)


def forget_dead_processes(before: datetime) -> int:
    """Rows of processes gone since before `before`: what they leased was ended first."""
    return HostProcess.objects.filter(seen__lt=before).delete()[0]
