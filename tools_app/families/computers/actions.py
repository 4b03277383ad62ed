"""Every change of a session's disposable computers: one `do_*` function each."""
from django.db import transaction

from kernel.refusals import Refused
from sessions_app.actions import require

from .models import Computer

MAX_COMPUTERS_PER_SESSION = 4


@transaction.atomic
def do_request_computer(principal, session):
    require(principal, "session:write", session)
    if Computer.objects.select_for_update().filter(session=session).count() >= MAX_COMPUTERS_PER_SESSION:
        raise Refused(f"This session already has {MAX_COMPUTERS_PER_SESSION} computers; release one first.",
                      "conflict")
    return Computer.objects.create(session=session)


@transaction.atomic
def do_release_computer(principal, computer):
    require(principal, "session:write", computer.session)
    computer.delete()
