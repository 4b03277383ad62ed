"""The channel layer drops nothing: a burst larger than channels_redis' default capacity (100
undelivered messages, past which its list layer dropped `toolCallReady` and lost calls) reaches
its subscriber whole by the layer alone, and the call after it completes. On Redis the layer is
pub/sub: a receiver hears when Redis goes away, and its groups hear again once Redis is back."""
import asyncio
import contextlib
import shutil
import uuid

import pytest
from asgiref.sync import async_to_sync
from django.db import transaction
from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError

from kernel.channel_layer import PubSubChannelLayer
from sessions_app import events
from sessions_app.events import sockets

from ..ahp.protocol.harness import AhpClient, ServerThread, default_chat
from ..ahp.protocol.test_client_tools import announce, call_open_file, complete
from ..reliability.fault_helpers import PrivateRedis

BURST = 500  # five times channels_redis' default capacity


@pytest.fixture
def host_without_catch_up(transactional_db, monkeypatch):
    """A server whose heartbeat (which sends sockets what the log holds beyond what they heard)
    never comes within a test: whatever a client hears, the layer carried."""
    monkeypatch.setattr(sockets, "HEARTBEAT_SECONDS", 3600)
    with ServerThread() as server:
        yield server


def test_a_burst_past_the_old_layers_capacity_reaches_the_client_whole_and_no_call_is_lost(
        acme, host_without_catch_up):
    port = host_without_catch_up.port
    with AhpClient(port, acme.tokens["member"], "alice") as alice, AhpClient(port, acme.tokens["member"], "ide") as ide:
        session = alice.create_session()
        chat = default_chat(alice, session)
        alice.subscribe(chat)
        announce(ide, session)
        ide.subscribe(chat)
        burst = [(session, {"type": "session/titleChanged", "title": f"title {i}"}, None) for i in range(BURST)]
        with transaction.atomic():  # one delivery of the whole burst, ahead of the call
            events.publish_many(acme.tenant.pk, burst)
        turn, start = call_open_file(alice, chat)
        ready = ide.action("chat/toolCallReady", turnId=turn, toolCallId=start["toolCallId"])
        # The burst's titles (the first message then names the session, which has none in its row).
        titles = [f["params"]["action"]["title"] for f in ide.notifications if f.get("method") == "action"
                  and f["params"]["action"]["type"] == "session/titleChanged"
                  and f["params"]["action"]["title"].startswith("title ")]
        assert titles == [f"title {i}" for i in range(BURST)]
        complete(ide, chat, turn, ready["action"]["toolCallId"], text="opened after the burst")
        assert alice.reply_to(turn) == "opened after the burst"


needs_redis_server = pytest.mark.skipif(not shutil.which("redis-server"), reason="needs a redis-server binary")


@pytest.fixture
def private_layer(tmp_path):
    """A Redis of the test's own (it may kill it) and a pub/sub layer on it."""
    redis = PrivateRedis(tmp_path)
    redis.start()
    try:
        yield redis, PubSubChannelLayer(hosts=[redis.url])
    finally:
        redis.stop()


@needs_redis_server
def test_a_pubsub_receiver_hears_that_redis_went_away_and_its_group_hears_again_after(private_layer):
    redis, layer = private_layer
    other_process = PubSubChannelLayer(hosts=[redis.url])  # its group messages come through Redis
    group = f"wake.{uuid.uuid4().hex}"

    async def scenario():
        channel = await layer.new_channel()
        await layer.group_add(group, channel)
        await other_process.group_send(group, {"type": "wake", "n": 1})
        before = (await asyncio.wait_for(layer.receive(channel), 5))["n"]
        redis.kill()
        with pytest.raises(RedisConnectionError):
            await asyncio.wait_for(layer.receive(channel), 5)
        redis.start()
        # The membership outlives the restart: redis-py subscribes again when it reconnects. Until
        # it has, what is sent is lost, so the wake-up is sent again until it is heard.
        receiving = None
        for _ in range(100):
            if receiving is None or (receiving.done() and receiving.exception()):
                receiving = asyncio.ensure_future(layer.receive(channel))  # past the failures told meanwhile
            with contextlib.suppress(RedisConnectionError):
                await other_process.group_send(group, {"type": "wake", "n": 2})
            await asyncio.wait({receiving}, timeout=0.2)
            if receiving.done() and not receiving.exception():
                return before, receiving.result()["n"]
        raise AssertionError("the group never heard again after Redis came back")

    assert async_to_sync(scenario)() == (1, 2)


@needs_redis_server
def test_a_process_channels_share_one_subscription_and_hear_other_processes_through_it(private_layer):
    """A socket's channel, a waiter's, a reply's: opened and closed by the thousand, they cost Redis
    no SUBSCRIBE and UNSUBSCRIBE each. Another process's message reaches the channel it names;
    one for a channel already gone is dropped, and the next still arrives."""
    redis, layer = private_layer
    other_process = PubSubChannelLayer(hosts=[redis.url])
    redis_client = Redis.from_url(redis.url)

    async def subscribes():
        return (await redis_client.info("commandstats")).get("cmdstat_subscribe", {}).get("calls", 0)

    async def scenario():
        first = await layer.new_channel()
        before = await subscribes()
        channels = [await layer.new_channel() for _ in range(100)]
        for channel in channels:
            await layer.delete_channel(channel)
        subscribed = await redis_client.pubsub_channels()
        await other_process.send(channels[0], {"type": "reply", "n": 1})  # gone: dropped
        await other_process.send(first, {"type": "reply", "n": 2})
        heard = (await asyncio.wait_for(layer.receive(first), 5))["n"]
        return await subscribes() - before, len(subscribed), heard

    assert async_to_sync(scenario)() == (0, 1, 2)


@needs_redis_server
def test_a_message_to_a_channel_of_the_same_process_is_handed_over_without_redis(private_layer):
    """A completion waking an agent of the same process (the front gives a tenant's sockets and
    their agents one process) costs Redis no PUBLISH and arrives while Redis is away; a group's
    message still goes through Redis, for every process."""
    redis, layer = private_layer
    redis_client = Redis.from_url(redis.url)

    async def publishes():
        return (await redis_client.info("commandstats")).get("cmdstat_publish", {}).get("calls", 0)

    async def scenario():
        waker = await layer.new_channel()
        before = await publishes()
        await layer.send(waker, {"type": "wake", "n": 1})
        woken = (await asyncio.wait_for(layer.receive(waker), 5))["n"]
        after_send = await publishes()
        await layer.group_send(f"chat.{uuid.uuid4().hex}", {"type": "ahp.action"})
        after_group = await publishes()
        redis.kill()
        await layer.send(waker, {"type": "wake", "n": 2})
        while True:  # past the failure told to every receiver of the process
            with contextlib.suppress(RedisConnectionError):
                return woken, after_send - before, after_group - after_send, (await layer.receive(waker))["n"]

    assert async_to_sync(scenario)() == (1, 0, 1, 2)


@needs_redis_server
def test_a_groups_members_in_the_sending_process_hear_it_at_once_and_once_and_others_through_redis(private_layer):
    """A call's news to its client's socket in the same process skips the trip through Redis and
    arrives while Redis is away; the copy Redis hands back is dropped, and the group's members
    in another process hear it through Redis. (Two processes' messages may reach a member in
    either order, as two processes' publishes always could: subscribers catch up on a gap.)"""
    redis, layer = private_layer
    other_process = PubSubChannelLayer(hosts=[redis.url])
    group = f"chat.{uuid.uuid4().hex}"

    async def heard(layer, channel):
        return (await asyncio.wait_for(layer.receive(channel), 5))["n"]

    async def scenario():
        here, there = await layer.new_channel(), await other_process.new_channel()
        await layer.group_add(group, here)
        await other_process.group_add(group, there)
        # Each message a trip behind the one before, so a copy handed back would be heard first.
        await layer.group_send(group, {"type": "ahp.action", "n": 1})
        await other_process.group_send(group, {"type": "ahp.action", "n": 2})
        heard_here = [await heard(layer, here), await heard(layer, here)]
        heard_there = sorted([await heard(other_process, there), await heard(other_process, there)])
        await layer.group_send(group, {"type": "ahp.action", "n": 3})
        heard_both = [await heard(layer, here), await heard(other_process, there)]
        redis.kill()
        with contextlib.suppress(RedisConnectionError):
            await layer.group_send(group, {"type": "ahp.action", "n": 4})
        while True:  # past the failure told to every receiver of the process
            with contextlib.suppress(RedisConnectionError):
                return heard_here, heard_there, heard_both, await heard(layer, here)

    assert async_to_sync(scenario)() == ([1, 2], [1, 2], [3, 3], 4)


@needs_redis_server
def test_publishes_asked_for_together_arrive_whole_and_in_the_order_asked(private_layer):
    """Publishes asked for while one trip to Redis is on its way go together in the next: a
    receiver hears every one of them, in the order they were asked for."""
    _, layer = private_layer
    group = f"chat.{uuid.uuid4().hex}"

    async def scenario():
        listener = await layer.new_channel()
        await layer.group_add(group, listener)
        await asyncio.gather(*(layer.group_send(group, {"type": "ahp.action", "n": n}) for n in range(BURST)))
        return [(await asyncio.wait_for(layer.receive(listener), 5))["n"] for _ in range(BURST)]

    assert async_to_sync(scenario)() == list(range(BURST))
