"""Publishing AHP actions: a gap-free serverSeq, a bounded log for replay, and delivery to
subscribers through the channel layer once the transaction that caused them commits.

`publish` must run inside the transaction of the state change it reports (every `do_*`
function does). It takes the host-wide counter's row lock, so actions are numbered in commit
order and a snapshot read under `snapshot_lock` is consistent with `serverSeq`.
"""
import os
import uuid

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

from .models import ActionLog, ServerSeq

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


def _lock_counter():
    counter = ServerSeq.objects.select_for_update().filter(pk=1).first()
    if counter is None:
        counter, _ = ServerSeq.objects.get_or_create(pk=1)
        counter = ServerSeq.objects.select_for_update().get(pk=1)
    return counter


def current_seq():
    counter = ServerSeq.objects.filter(pk=1).first()
    return counter.value if counter else 0


def snapshot_lock():
    """Call inside a transaction before reading a snapshot; answers the snapshot's fromSeq."""
    return _lock_counter().value


def envelope(channel, action, seq, origin=None, rejection_reason=None):
    env = {"channel": channel, "action": action, "serverSeq": seq}
    if origin is not None:
        env["origin"] = origin
    if rejection_reason is not None:
        env["rejectionReason"] = rejection_reason
    return env


def publish(tenant_id, channel, action, origin=None):
    """Number `action`, log it, and deliver it to `channel`'s subscribers after commit."""
    with transaction.atomic():
        counter = _lock_counter()
        counter.value += 1
        counter.save(update_fields=["value"])
        env = envelope(channel, action, counter.value, origin)
        ActionLog.objects.create(seq=counter.value, tenant_id=tenant_id, channel=channel, envelope=env, process=PROCESS)
    transaction.on_commit(lambda: deliver(tenant_id, env))
    return env


def deliver(tenant_id, env):
    layer = get_channel_layer()
    async_to_sync(layer.group_send)(group_for(env["channel"], tenant_id), {"type": "ahp.action", "envelope": env})


def notify(tenant_id, method, params):
    """A protocol notification on params["channel"] (root/sessionAdded and the like): ephemeral,
    never replayed, sent after commit."""
    message = {"type": "ahp.notification", "method": method, "params": params}

    def send():
        async_to_sync(get_channel_layer().group_send)(group_for(params["channel"], tenant_id), message)

    transaction.on_commit(send)


def wake(group):
    """After commit, wake whoever waits on `group` (an agent waiting for a tool call's result)."""
    def send():
        async_to_sync(get_channel_layer().group_send)(group, {"type": "wake", "group": group})

    transaction.on_commit(send)


def prune_action_log(keep=REPLAY_LOG_SIZE):
    newest = current_seq()
    ActionLog.objects.filter(seq__lte=newest - keep).delete()
