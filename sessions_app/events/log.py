"""Publishing AHP actions: each numbered by its tenant's counter, kept in a bounded log for
replay, and delivered to subscribers once the transaction that caused it commits.

`publish` must run inside the transaction of the state change it reports (every `do_*`
function does).
"""
import os
import uuid

from django.db import connection, transaction
from django.utils import timezone

from kernel.after_commit import after_commit
from kernel.outbox import place_in_line

from ..models import ActionLog, ServerSeq
from .delivery import deliver
from .numbering import take_seqs

# Identifies this process in the action log, so a tailer forwards only what others published.
PROCESS = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
REPLAY_LOG_SIZE = 10000  # per tenant
# A rejected client action takes no number: its echo carries 0, which no accepted action has
# (the counter starts at 1), so a client never mistakes it for the action of that number.
REJECTED_SEQ = 0


def envelope(channel, action, seq, origin=None, rejection_reason=None):
    env = {"channel": channel, "action": action, "serverSeq": seq}
    if origin is not None:
        env["origin"] = origin
    if rejection_reason is not None:
        env["rejectionReason"] = rejection_reason
    return env


def publish(tenant_id, channel, action, origin=None):
    """Number `action`, log it, and deliver it to `channel`'s subscribers after commit."""
    return publish_many(tenant_id, [(channel, action, origin)])[0]


def publish_many(tenant_id, items):
    """Publish (channel, action, origin) items in order, numbered by one step of the tenant's counter."""
    with transaction.atomic(savepoint=False):  # inside the change's transaction: no savepoint of its own
        last = take_seqs(tenant_id, len(items))
        place = place_in_line(tenant_id)
        envelopes = [envelope(channel, action, last - len(items) + 1 + i, origin)
                     for i, (channel, action, origin) in enumerate(items)]
        log(tenant_id, envelopes)
    after_commit("delivering actions to subscribers (they catch up from the log)",
                 lambda: deliver(tenant_id, place, *envelopes))
    return envelopes


def log(tenant_id, envelopes):
    """The envelopes into the action log in one INSERT. The host's most frequent write, so no
    model instance per row (bulk_create's) and no ids read back."""
    field = ActionLog._meta.get_field
    created = field("created").get_db_prep_save(timezone.now(), connection)
    rows = [(env["serverSeq"], tenant_id, env["channel"], field("envelope").get_db_prep_save(env, connection), PROCESS,
             created) for env in envelopes]
    with connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO {ActionLog._meta.db_table} (seq, tenant_id, channel, envelope, process, created) "
                       f"VALUES {', '.join(['(%s, %s, %s, %s, %s, %s)'] * len(rows))}", [v for row in rows for v in row])


def prune_action_log(keep=REPLAY_LOG_SIZE):
    """Keep each tenant's newest `keep` actions."""
    for tenant_id, newest in ServerSeq.objects.values_list("tenant_id", "value"):
        ActionLog.objects.filter(tenant_id=tenant_id, seq__lte=newest - keep).delete()
