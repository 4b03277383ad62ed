import gc
import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ahp.settings")

from django.core.asgi import get_asgi_application  # noqa: E402

django_http = get_asgi_application()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler  # noqa: E402
from django.urls import path  # noqa: E402

from ahp.mcp.endpoint import with_tools_endpoint  # noqa: E402
from ahp.protocol.consumer import AhpConsumer  # noqa: E402
from sandbox.outbound import remember_served_port  # noqa: E402


def noting_the_port(app):
    """`app`, noting the port each connection came in on: the host's own, which no tenant's
    connection may reach (sandbox.outbound), in a process started with no PORT to tell it."""
    async def noted(scope, receive, send):
        server = scope.get("server")
        if server and server[1]:
            remember_served_port(server[1])
        return await app(scope, receive, send)
    return noted


application = noting_the_port(ProtocolTypeRouter(
    {
        # Static files (the admin's CSS) are served in process so one command runs everything.
        # Paths under /ahp-mcp/ are the sessions' MCP tools endpoints (ahp/mcp); the rest is Django.
        "http": with_tools_endpoint(ASGIStaticFilesHandler(django_http)),
        "websocket": URLRouter([path("ahp", AhpConsumer.as_asgi())]),
    }
))

# What is built by now (Django, the apps, the libraries they import) lives as long as the process:
# frozen out of the garbage collector's full passes, which otherwise walked all of it (~250,000
# objects, 150-200 ms with the event loop stopped) about every second while sockets came and went.
gc.collect()
gc.freeze()
