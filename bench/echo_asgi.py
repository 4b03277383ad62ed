"""The framework floor: a minimal Channels JSON consumer that echoes each frame, served by the
same ASGI server as the host. Also runnable as a bare `websockets` echo (`python -m bench.echo_asgi PORT`)."""
import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ahp.settings")

import django  # noqa: E402

django.setup()

from channels.generic.websocket import AsyncJsonWebsocketConsumer  # noqa: E402
from channels.routing import URLRouter  # noqa: E402
from django.urls import path  # noqa: E402


class EchoConsumer(AsyncJsonWebsocketConsumer):
    async def receive_json(self, content, **kwargs):
        await self.send_json(content)


application = URLRouter([path("echo", EchoConsumer.as_asgi())])


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
