"""The floors: a minimal Channels JSON consumer that echoes each frame, served by the same ASGI
server as the host (`/echo`); one that answers each request with an empty result (`/answer`:
the floor of bench.churn's churning sockets, whose `initialize` it answers); the durable floor
(`/durable`), the same echo after what a durable client-tool call needs at least, two
synchronous transactions (each one INSERT) and two hops through the channel layer; and a bare
`websockets` echo (`python -m bench.echo_asgi PORT`)."""
import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ahp.settings")

import django  # noqa: E402

django.setup()

from channels.db import database_sync_to_async  # noqa: E402
from channels.generic.websocket import AsyncJsonWebsocketConsumer  # noqa: E402
from channels.routing import URLRouter  # noqa: E402
from django.db import connection, transaction  # noqa: E402
from django.urls import path  # noqa: E402


class EchoConsumer(AsyncJsonWebsocketConsumer):
    async def receive_json(self, content, **kwargs):
        await self.send_json(content)


class AnswerConsumer(AsyncJsonWebsocketConsumer):
    async def receive_json(self, content, **kwargs):
        await self.send_json({"jsonrpc": "2.0", "id": content.get("id"), "result": {}})


def durable_write():
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("CREATE TABLE IF NOT EXISTS bench_floor (payload text)")
        cursor.execute("INSERT INTO bench_floor (payload) VALUES (%s)", ["call"])


class DurableEchoConsumer(AsyncJsonWebsocketConsumer):
    """A frame's answer waits for a transaction, a layer hop, a transaction and a layer hop."""

    async def receive_json(self, content, **kwargs):
        await database_sync_to_async(durable_write)()
        await self.channel_layer.send(self.channel_name, {"type": "first.hop", "content": content})

    async def first_hop(self, message):
        await database_sync_to_async(durable_write)()
        await self.channel_layer.send(self.channel_name, {"type": "second.hop", "content": message["content"]})

    async def second_hop(self, message):
        await self.send_json(message["content"])


application = URLRouter([path("echo", EchoConsumer.as_asgi()), path("answer", AnswerConsumer.as_asgi()),
                         path("durable", DurableEchoConsumer.as_asgi())])


async def bare_echo(port):
    from websockets.asyncio.server import serve

    async def echo(websocket):
        async for message in websocket:
            await websocket.send(message)

    async with serve(echo, "127.0.0.1", port, max_size=None) as server:
        await server.serve_forever()


if __name__ == "__main__":
    import asyncio
    import sys

    asyncio.run(bare_echo(int(sys.argv[1])))
