"""Publishing AHP actions: each numbered by its tenant's counter, kept in a bounded log for
replay, and delivered to subscribers once the transaction that caused it commits.

`publish` must run inside the transaction of the state change it reports (every `do_*`
function does).
"""
import functools
import os
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NotRequired, TypedDict

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from kernel.after_commit import after_commit
from kernel.outbox import place_in_line
from kernel.rows import concrete_field, run

from ..models import ActionLog, ServerSeq
from ..queries import log_rows, step_and_log
from .delivery import deliver
from .numbering import create_counter, take_seqs

# Identifies this process in the action log, so a tailer forwards only what others published.
PROCESS = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"

Action = dict[str, Any]  # an AHP action: its "type" and that type's fields
Origin = dict[str, Any]  # the client action a published action answers: {clientId, clientSeq}
Item = tuple[str, Action, Origin | None]  # (channel, action, origin) as publish_many takes them
Write = tuple[str, Sequence[Any]]  # (sql, params) of a write run with the numbering


class Envelope(TypedDict):
    """AHP's ActionEnvelope as the log keeps it and subscribers receive it."""

    channel: str
    action: Action
    serverSeq: int | None  # None until numbered
    origin: NotRequired[Origin]
    rejectionReason: NotRequired[str]


@functools.cache
def this_node() -> str:
    """The node this process runs on: AHP_NODE_ID, else a name made once for this VAR_DIR (each
    machine has its own), so every process of one machine names the same node."""
    if settings.AHP_NODE_ID:
        return settings.AHP_NODE_ID
    path = Path(settings.VAR_DIR) / "node_id"
    if not path.exists():
        draft = path.with_name(f"node_id.{os.getpid()}")
        draft.write_text(f"node-{uuid.uuid4().hex[:12]}")
        try:
            os.link(draft, path)  # whole or not at all; a process that made it first wins
        except FileExistsError:
            pass
        finally:
            draft.unlink()
    return path.read_text().strip()
REPLAY_LOG_SIZE = 10000  # per tenant
# A rejected client action takes no number: its echo carries 0, which no accepted action has
# (the counter starts at 1), so a client never mistakes it for the action of that number.
REJECTED_SEQ = 0


def envelope(channel: str, action: Action, seq: int | None, origin: Origin | None = None,
             rejection_reason: str | None = None) -> Envelope:
    env: Envelope = {"channel": channel, "action": action, "serverSeq": seq}
    if origin is not None:
        env["origin"] = origin
    if rejection_reason is not None:
        env["rejectionReason"] = rejection_reason
    return env


def publish(tenant_id: int, channel: str, action: Action, origin: Origin | None = None) -> Envelope:
    """Number `action`, log it, and deliver it to `channel`'s subscribers after commit."""
    return publish_many(tenant_id, [(channel, action, origin)])[0]


def publish_many(tenant_id: int, items: Sequence[Item], write: Write | None = None) -> list[Envelope]:
    """Publish (channel, action, origin) items in order, numbered by one step of the tenant's
    counter. `write` (sql, params), a write of the change they report, runs with the numbering
    (on PostgreSQL in its statement)."""
    with transaction.atomic(savepoint=False):  # inside the change's transaction: no savepoint of its own
        envelopes = [envelope(channel, action, None, origin) for channel, action, origin in items]
        number_and_log(tenant_id, envelopes, write)
        place = place_in_line(tenant_id)
    after_commit("delivering actions to subscribers (they catch up from the log)",
                 lambda: deliver(tenant_id, place, *envelopes))
    return envelopes


def number_and_log(tenant_id: int, envelopes: list[Envelope], write: Write | None = None) -> None:
    """Give the envelopes their serverSeq by one step of the tenant's counter (its row locked
    until commit) and write them into the action log, the host's most frequent write, after the
    caller's `write` (sql, params), if any: on PostgreSQL in one statement (a round trip costs
    the serving process more CPU than the database spends on it), elsewhere in two or three. No
    model instance per row and no ids read back."""
    prepared = concrete_field(ActionLog, "envelope").get_db_prep_save
    created = concrete_field(ActionLog, "created").get_db_prep_save(timezone.now(), connection)
    if connection.vendor == "postgresql":  # the log's copies get their serverSeq in the statement
        last = step_and_log(tenant_id, [(env["channel"], prepared(env, connection)) for env in envelopes], PROCESS,
                            created, write)
        if last is None:  # the tenant's first action: its counter is made, then it is taken (`write` ran)
            create_counter(tenant_id)
            return number_and_log(tenant_id, envelopes)
        _number(envelopes, last)
        return
    if write:
        run(*write)
    _number(envelopes, take_seqs(tenant_id, len(envelopes)))
    log_rows([(env["serverSeq"], tenant_id, env["channel"], prepared(env, connection), PROCESS, created)
              for env in envelopes])


def _number(envelopes: list[Envelope], last: int) -> None:
    """Each envelope's serverSeq, in order, the last one's being `last`."""
    for seq, env in enumerate(envelopes, last - len(envelopes) + 1):
        env["serverSeq"] = seq


def prune_action_log(keep: int = REPLAY_LOG_SIZE) -> None:
    """Keep each tenant's newest `keep` actions."""
    for tenant_id, newest in ServerSeq.objects.values_list("tenant_id", "value"):
        ActionLog.objects.filter(tenant_id=tenant_id, seq__lte=newest - keep).delete()
