"""A session's MCP servers' tools are the same on every host process: listed by one ASGI
worker, offered and run by another and by a host started after a restart (PostgreSQL + Redis).
Within a process a stdio server keeps running in its session's sandbox between calls."""
import sys
import textwrap

import pytest
from django.conf import settings
from django.db import connection

from tools_app.models import StdioServer

from ....ahp.protocol.harness import AhpClient, default_chat, set_config
from ....conftest import production_server
from .test_configured_servers import listed

pytestmark = [
    pytest.mark.e2e,  # real server processes and a stdio server in a sandbox
    pytest.mark.skipif(
        not settings.REDIS_URL or connection.vendor != "postgresql",
        reason="crossing processes needs the shared channel layer (Redis) and PostgreSQL",
    ),
]

COUNTING_SERVER = textwrap.dedent('''
    from mcp.server.fastmcp import FastMCP

    app = FastMCP("counting")
    calls = 0

    @app.tool()
    def shout(text: str) -> str:
        """Upper-case the text, numbered by how many calls this server process has answered."""
        global calls
        calls += 1
        return f"{text.upper()} #{calls}"

    if __name__ == "__main__":
        app.run()
''')


@pytest.fixture
def counting_server(tmp_path, transactional_db):
    script = tmp_path / "counting_server.py"
    script.write_text(COUNTING_SERVER)
    tmp_path.chmod(0o755)
    StdioServer.objects.create(name="counting", command=sys.executable, args=[str(script)],
                               read_only_paths=[str(tmp_path), sys.prefix])
    return {"type": "stdio", "server": "counting"}


def shout(client, chat, text):
    return client.reply_to(client.start_turn(chat, f'/call counting_shout {{"text": "{text}"}}'), timeout=40)


def test_listed_on_one_worker_called_on_another_and_after_a_restart(acme, counting_server):
    with production_server() as port_a:
        set_config(port_a, acme.tokens["root"], mcpServers={"counting": counting_server})
        with AhpClient(port_a, acme.tokens["member"], "alice") as alice:
            session = alice.create_session()
            listed(session, "counting")
            with production_server() as port_b, AhpClient(port_b, acme.tokens["member"], "bob") as bob:
                chat = default_chat(bob, session)
                bob.subscribe(chat)
                assert "counting_shout" in bob.reply_to(bob.start_turn(chat, "/tools")).split("\n")
                # Worker B's own connection to the server, kept between its calls.
                assert shout(bob, chat, "one") == "ONE #1"
                assert shout(bob, chat, "two") == "TWO #2"
    # The host restarted: nothing in memory, the row still offers the tools.
    with production_server() as port_c, AhpClient(port_c, acme.tokens["member"], "alice") as alice:
        chat = default_chat(alice, session)
        alice.subscribe(chat)
        assert shout(alice, chat, "again") == "AGAIN #1"
