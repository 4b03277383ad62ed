"""Delivery through the channel layer, after the transaction that caused it commits: logged
actions, ephemeral notifications and wake-ups of waiters. The committing thread does not wait
for the layer (kernel.outbox)."""
import itertools
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from channels.layers import get_channel_layer

from kernel.after_commit import after_commit
from kernel.outbox import Fillable, send_soon

if TYPE_CHECKING:
    from .log import Envelope


def group_for(channel: str, tenant_id: int) -> str:
    """Channel layer group of an AHP channel. Root is per tenant: tenants never share a group."""
    if channel == "ahp-root://":
        return f"root.{tenant_id}"
    kind, _, rest = channel.partition(":/")
    # Group names allow no "/": a session's annotations channel becomes session.<uuid>.annotations.
    return f"{kind.removeprefix('ahp-')}.{rest.replace('/', '.')}"


def notification_frame(method: str, params: Any) -> str:
    """The JSON-RPC notification as the text a socket sends (ASCII: its length is its size in bytes)."""
    return json.dumps({"jsonrpc": "2.0", "method": method, "params": params})


def action_message(envelopes: "Sequence[Envelope]") -> dict[str, Any]:
    """The layer message carrying one channel's `envelopes`, in serverSeq order, as the frames a
    socket sends: serialized once here, not once per subscriber."""
    return {"type": "ahp.action", "channel": envelopes[0]["channel"], "seqs": [env["serverSeq"] for env in envelopes],
            "frames": [notification_frame("action", env) for env in envelopes]}


def deliver(tenant_id: int, place: Fillable, *envelopes: "Envelope") -> None:
    """Hand envelopes to their channels' groups, in order, in one trip to the event loop, at
    `place` in the tenant's line (kernel.outbox.place_in_line): one layer message per run of
    envelopes on the same channel."""
    layer = get_channel_layer()
    runs = [list(run) for _, run in itertools.groupby(envelopes, key=lambda env: env["channel"])]

    async def send_all() -> None:
        for run in runs:
            await layer.group_send(group_for(run[0]["channel"], tenant_id), action_message(run))

    place.fill(f"serverSeq {envelopes[0]['serverSeq']}-{envelopes[-1]['serverSeq']}", send_all)


def notify(tenant_id: int, method: str, params: dict[str, Any]) -> None:
    """A protocol notification on params["channel"] (root/sessionAdded and the like): ephemeral,
    never replayed, sent after commit."""
    message = {"type": "ahp.notification", "method": method, "params": params}

    async def send() -> None:
        await get_channel_layer().group_send(group_for(params["channel"], tenant_id), message)

    after_commit(method, lambda: send_soon(method, send))


def wake(channel: str, call_id: object, result: dict[str, Any]) -> None:
    """After commit, wake the agent waiting for call `call_id` on its process's `channel`, handing
    it the committed result so it need not read the row again."""
    async def send() -> None:
        await get_channel_layer().send(channel, {"type": "wake", "call": str(call_id), "result": result})

    what = f"the wake-up of call {call_id}"
    after_commit(what, lambda: send_soon(what, send))
