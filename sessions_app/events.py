"""Publishing AHP actions: a gap-free serverSeq, a bounded log for replay, and delivery to
subscribers through the channel layer once the transaction that caused them commits.

`publish` must run inside the transaction of the state change it reports (every `do_*`
function does). It takes the host-wide counter's row lock, so actions are numbered in commit
order and a snapshot read under `snapshot_lock` is consistent with `serverSeq`.
"""
import logging
import os
import uuid

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import connection, transaction

from .models import ActionLog, ServerSeq

logger = logging.getLogger(__name__)

# Identifies this process in the action log, so a tailer forwards only what others published.
PROCESS = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
REPLAY_LOG_SIZE = 10000


def group_for(channel, tenant_id):
    """Channel layer group of an AHP channel. Root is per tenant: tenants never share a group."""
    if channel == "ahp-root://":
        return f"root.{tenant_id}"
    kind, _, rest = channel.partition(":/")
    # Group names allow no "/": a session's annotations channel becomes session.<uuid>.annotations.
    return f"{kind.removeprefix('ahp-')}.{rest.replace('/', '.')}"


def _take_seqs(count):
    """Advance the counter by `count` in one statement (taking its row lock until commit) and
    answer the last number taken."""
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {ServerSeq._meta.db_table} SET value = value + %s WHERE id = 1 RETURNING value", [count])
        row = cursor.fetchone()
    if row is None:
        ServerSeq.objects.get_or_create(pk=1)
        return _take_seqs(count)
    return row[0]


def current_seq():
    counter = ServerSeq.objects.filter(pk=1).first()
    return counter.value if counter else 0


def snapshot_lock():
    """Call inside a transaction before reading a snapshot; answers the snapshot's fromSeq."""
    return _take_seqs(0)


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
    """Publish (channel, action, origin) items in order, numbered by one counter step."""
    with transaction.atomic():
        last = _take_seqs(len(items))
        envelopes = [envelope(channel, action, last - len(items) + 1 + i, origin)
                     for i, (channel, action, origin) in enumerate(items)]
        ActionLog.objects.bulk_create([
            ActionLog(seq=env["serverSeq"], tenant_id=tenant_id, channel=env["channel"], envelope=env, process=PROCESS)
            for env in envelopes
        ])
    transaction.on_commit(lambda: deliver(tenant_id, *envelopes))
    return envelopes


def deliver(tenant_id, *envelopes):
    """Hand envelopes to their channels' groups, in order, in one trip to the event loop."""
    layer = get_channel_layer()

    async def send_all():
        for env in envelopes:
            await layer.group_send(group_for(env["channel"], tenant_id), {"type": "ahp.action", "envelope": env})

    _after_commit_send(f"serverSeq {envelopes[0]['serverSeq']}-{envelopes[-1]['serverSeq']}", send_all)


def _after_commit_send(what, send):
    """Run an after-commit send on the channel layer. The change it reports is committed (and an
    action logged), so a layer that is down (Redis restarting) must not turn it into an error for
    whoever made it: the failure is logged, the host closes its sockets with 1012, and clients
    catch up with `reconnect`, which replays the log; waiters read their rows."""
    try:
        async_to_sync(send)()
    except Exception as exc:
        logger.warning("Could not deliver %s through the channel layer (%s: %s); clients catch up by reconnect",
                       what, exc.__class__.__name__, exc)


def notify(tenant_id, method, params):
    """A protocol notification on params["channel"] (root/sessionAdded and the like): ephemeral,
    never replayed, sent after commit."""
    message = {"type": "ahp.notification", "method": method, "params": params}

    async def send():
        await get_channel_layer().group_send(group_for(params["channel"], tenant_id), message)

    transaction.on_commit(lambda: _after_commit_send(method, send))


def wake(group, result=None):
    """After commit, wake whoever waits on `group` (an agent waiting for a tool call), handing it
    the committed result so it need not read the row again."""
    async def send():
        await get_channel_layer().group_send(group, {"type": "wake", "group": group, "result": result})

    transaction.on_commit(lambda: _after_commit_send(f"the wake-up of {group}", send))


def prune_action_log(keep=REPLAY_LOG_SIZE):
    newest = current_seq()
    ActionLog.objects.filter(seq__lte=newest - keep).delete()
