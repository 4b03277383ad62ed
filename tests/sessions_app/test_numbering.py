"""Actions are numbered per tenant: one tenant's activity never moves another's serverSeq, and a
burst of deliveries larger than the channel layer's default capacity reaches its subscriber whole."""
import asyncio
import uuid

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from ..ahp.protocol.harness import AhpClient, default_chat

ROOT = {"channel": "ahp-root://"}


def test_one_tenants_actions_never_move_anothers_server_seq(acme, globex, host):
    with AhpClient(host.port, acme.tokens["member"], "alice") as alice, \
            AhpClient(host.port, globex.tokens["member"], "gus") as gus:
        before = gus.init_result["serverSeq"]
        session = alice.create_session()
        chat = default_chat(alice, session)
        alice.subscribe(chat)
        assert alice.reply_to(alice.start_turn(chat, "busy")) == "busy"
        turn_seqs = [frame["params"]["serverSeq"] for frame in alice.notifications if frame.get("method") == "action"]
        assert gus.call("subscribe", ROOT)["snapshot"]["fromSeq"] == before
        assert alice.call("subscribe", ROOT)["snapshot"]["fromSeq"] > before
        assert turn_seqs == sorted(turn_seqs)


def test_a_burst_beyond_the_layers_default_capacity_reaches_its_subscriber_whole(db):
    """Both layers drop a group's messages past 100 waiting on a channel by default, which lost
    toolCallReady under bursts; the host sizes them."""
    layer = get_channel_layer()
    group = f"burst.{uuid.uuid4().hex}"

    async def burst():
        channel = await layer.new_channel()
        await layer.group_add(group, channel)
        try:
            for n in range(500):
                await layer.group_send(group, {"type": "ahp.action", "n": n})
            return [(await asyncio.wait_for(layer.receive(channel), 5))["n"] for _ in range(500)]
        finally:
            await layer.group_discard(group, channel)

    assert async_to_sync(burst)() == list(range(500))
