"""The channel layer on Redis: channels_redis' pub/sub layer, whose receivers hear when Redis
fails.

Pub/sub keeps nothing undelivered in Redis, so it has no capacity past which it drops news
(channels_redis' list layer drops silently there, which lost `toolCallReady` under bursts); it
is also fewer Redis commands per message. A message to a channel of the sending process itself
never goes through Redis, and a group's members there get its message without waiting for Redis
to hand it back. A process's own channels (a socket's, a waiting agent's, a reply's) share one
Redis subscription, its inbox, named in theirs: opening and closing a socket costs Redis no
SUBSCRIBE and UNSUBSCRIBE of its own. What is published while a process is cut off from
Redis never reaches it: subscribers catch up from the action log and waiters read their rows.
The library's receive loop only logs a lost connection and retries (redis-py subscribes again
on reconnecting), so a consumer would never learn that its groups went deaf: here the error is
handed to every receiver of the process, as the list layer's receive raises it, and the host
closes its sockets for their clients to reconnect and replay (ahp.protocol.consumer).
"""
import asyncio
import logging
import uuid
from typing import Any

from channels_redis.pubsub import (
    RedisPubSubChannelLayer,
    RedisPubSubLoopLayer,
    RedisSingleShardConnection,
)
from channels_redis.utils import _wrap_close, decode_hosts
from redis.exceptions import RedisError

logger = logging.getLogger(__name__)

RECONNECT_SECONDS = 1.0


class PubSubChannelLayer(RedisPubSubChannelLayer):
    def _get_layer(self) -> "_LoopLayer":
        loop = asyncio.get_running_loop()
        layer = self._layers.get(loop)
        if layer is None:
            layer = self._layers[loop] = _LoopLayer(*self._args, **self._kwargs, channel_layer=self)
            _wrap_close(self, loop)
        return layer

    async def delete_channel(self, channel: str) -> None:
        """Stop receiving on a channel of new_channel() once it got its answer: the library
        forgets a channel only when a receive is cancelled, so every reply channel would stay
        for the life of the process."""
        self._get_layer().channels.pop(channel, None)

    def deserialize(self, message: bytes | Exception) -> dict[str, Any]:
        if isinstance(message, Exception):
            raise message  # the connection failed while this receiver waited
        return super().deserialize(message)


INBOX_MARK = "!"  # a channel of new_channel() is "<inbox>!<its own name>"


class _LoopLayer(RedisPubSubLoopLayer):
    def __init__(self, hosts: object = None, **kwargs: Any) -> None:
        super().__init__(hosts, **kwargs)
        self._shards = [_Shard(host, self) for host in decode_hosts(hosts)]
        self.inbox = f"{self.prefix}inbox.{uuid.uuid4().hex[:16]}"
        self.inbox_key = self.inbox.encode()  # as Redis names it in a message
        self._inbox_subscribed = False

    async def flush(self) -> None:
        await super().flush()
        self._inbox_subscribed = False

    async def new_channel(self, prefix: str = "specific.") -> str:
        """A channel of this loop's inbox: no Redis subscription of its own. While the inbox is
        cut off from Redis it fails unless Redis answers now, as a SUBSCRIBE of its own would: a
        socket opening then is told to come back (ahp.protocol.consumer), not left deaf."""
        shard = self._get_shard(self.inbox)
        if shard.outage is not None:
            await shard.reach_redis()
        if not self._inbox_subscribed:
            await shard.subscribe(self.inbox)
            self._inbox_subscribed = True  # redis-py subscribes again after a reconnect
        channel = f"{self.inbox}{INBOX_MARK}{prefix}{uuid.uuid4().hex}"
        self.channels[channel] = asyncio.Queue()
        return channel

    async def receive(self, channel: str) -> dict[str, Any]:
        """As the library's; a cancelled receive forgets a channel of the inbox."""
        queue = self.channels.get(channel)
        if queue is None or INBOX_MARK not in channel:
            return await super().receive(channel)
        try:
            message = await queue.get()
        except (asyncio.CancelledError, asyncio.TimeoutError, GeneratorExit):
            self.channels.pop(channel, None)  # the consumer is ending (the library's assumption too)
            raise
        return self.channel_layer.deserialize(message)

    async def send(self, channel: str, message: dict[str, Any]) -> None:
        """A message to a channel this loop receives on (an agent's wake-up from a completion the
        same process committed) goes to its queue: Redis would only hand it back here. Another
        process's channel is reached through that process's inbox, the channel's name first."""
        queue = self.channels.get(channel)
        if queue is not None:
            queue.put_nowait(self.channel_layer.serialize(message))
            return
        inbox, mark, _ = channel.partition(INBOX_MARK)
        if not mark:
            await super().send(channel, message)
            return
        await self._get_shard(inbox).publish(inbox, channel.encode() + b" " + self.channel_layer.serialize(message))

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        """The group's members on this loop get the message at once (a call's news reaching its
        client's socket in the same process): Redis would only hand it back a round trip later.
        It is published for other processes' members all the same, marked with this inbox, and
        this loop drops its own copy when Redis hands it back."""
        group_channel = self._get_group_channel_name(group)
        data = self.channel_layer.serialize(message)
        self.hand_to_members(group_channel, data)
        await self._get_shard(group_channel).publish(group_channel, self.inbox_key + b" " + data)

    def hand_to_members(self, group_channel: str, data: bytes) -> None:
        """A group's message to the group's members on this loop."""
        for channel in self.groups.get(group_channel, ()):
            queue = self.channels.get(channel)
            if queue is not None:
                queue.put_nowait(data)


class _Shard(RedisSingleShardConnection):
    def __init__(self, host: dict[str, Any], channel_layer: _LoopLayer) -> None:
        super().__init__(host, channel_layer)
        self._outgoing: list[tuple[str, bytes, asyncio.Future[None]]] = []  # (channel, message, future) for the next trip to Redis
        self._publisher: asyncio.Future[None] | None = None
        self.outage: Exception | None = None  # the error of the receive loop while it is cut off from Redis

    async def publish(self, channel: str, message: bytes) -> None:
        """Publishes asked for while one trip to Redis is on its way go together in the next, one
        write and one read for all of them, in the order they were asked for: the library's took a
        round trip each, one at a time, and every tenant's news of a process queues on it."""
        if not self._outgoing and not self._lock.locked():  # nothing on its way: this one goes alone, now
            await super().publish(channel, message)
            return
        sent = asyncio.get_running_loop().create_future()
        self._outgoing.append((channel, message, sent))
        if self._publisher is None or self._publisher.done():
            self._publisher = asyncio.ensure_future(self._publish_outgoing())
        await sent

    async def _publish_outgoing(self) -> None:
        while self._outgoing:
            batch, self._outgoing = self._outgoing, []
            try:
                async with self._lock:
                    self._ensure_redis()
                    if len(batch) == 1:
                        await self._redis.publish(*batch[0][:2])
                    else:
                        pipeline = self._redis.pipeline(transaction=False)
                        for channel, message, _ in batch:
                            pipeline.publish(channel, message)
                        await pipeline.execute()
            except Exception as exc:
                for *_, sent in batch:
                    if not sent.done():
                        sent.set_exception(exc)
            else:
                for *_, sent in batch:
                    if not sent.done():
                        sent.set_result(None)

    def _receive_message(self, message: dict[str, Any] | None) -> None:
        """A message of the inbox goes to the channel it names (dropped when that channel is
        gone, as a message to an unsubscribed channel is); a group's message to the group's
        members here, unless this loop sent it (they have it); anything else as the library
        does. A channel's name holds no space, so the first one ends it."""
        if message is None:
            return
        layer = self.channel_layer
        name, data = message["channel"], message["data"]
        if name == layer.inbox_key:
            channel, _, data = data.partition(b" ")
            queue = layer.channels.get(channel.decode())
            if queue is not None:
                queue.put_nowait(data)
            return
        group_channel = name.decode()
        if group_channel in layer.groups:
            sender, _, data = data.partition(b" ")
            if sender != layer.inbox_key:
                layer.hand_to_members(group_channel, data)
            return
        super()._receive_message(message)

    async def reach_redis(self) -> None:
        """Reconnect the subscriptions now (redis-py subscribes to them all again), without
        waiting for the receive loop's next try; raises while Redis is still away."""
        async with self._lock:
            self._ensure_redis()
            self._ensure_receiver()
            await self._pubsub.ping()
        self.outage = None

    async def _do_receiving(self) -> None:
        while True:
            try:
                if self._pubsub and self._pubsub.subscribed:
                    message = await self._pubsub.get_message(ignore_subscribe_messages=True, timeout=0.1)
                    self.outage = None
                    self._receive_message(message)
                else:
                    await asyncio.sleep(0.1)
            except Exception as exc:
                logger.warning("The channel layer's receive loop failed (%s: %s); trying again in %g s",
                               exc.__class__.__name__, exc, RECONNECT_SECONDS)
                # Redis is away: every receiver is told, once (a dead channel's queue never drains).
                if isinstance(exc, (RedisError, OSError)) and self.outage is None:
                    self.outage = exc
                    for queue in self.channel_layer.channels.values():
                        queue.put_nowait(exc)
                await asyncio.sleep(RECONNECT_SECONDS)
