"""A session's home: the host process (on one node) where its files and processes are touched.
The process that first serves such a request for it takes it; another takes it over only once
that process stopped renewing its lease (it died, or its node did)."""
from datetime import timedelta

from django.db import transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from ..events.log import this_node
from ..models import HostProcess, SessionHome, Turn
from .presence import live_processes
from .turns import do_end_abandoned_turn


@transaction.atomic
def do_find_home(session_id: str, process: str, lease_seconds: float) -> str:
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
