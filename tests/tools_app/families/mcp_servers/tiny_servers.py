"""The operator's tiny MCP server `tiny` (one tool, `shout`), over stdio and over streamable HTTP: the
fixtures the MCP servers' and the agents' tests share (their conftests offer them)."""
import sys
import textwrap
import threading

import pytest
import uvicorn

from tools_app.models import StdioServer

from ....ahp.mcp.helpers import wait_until
from ....conftest import free_port

TINY_SERVER = textwrap.dedent('''
    import os
    from mcp.server.fastmcp import FastMCP

    app = FastMCP("tiny")

    @app.tool()
    def shout(text: str) -> str:
        """Upper-case the text."""
        return text.upper() + os.environ.get("SUFFIX", "")

    if __name__ == "__main__":
        app.run()
''')


@pytest.fixture
def tiny_server(tmp_path, db):
    """The operator's stdio server `tiny` (a tenant picks it by name); it runs in the sandbox."""
    script = tmp_path / "tiny_server.py"
    script.write_text(TINY_SERVER)
    tmp_path.chmod(0o755)  # the sandbox's user reads the operator's program
    StdioServer.objects.create(name="tiny", command=sys.executable, args=[str(script)],
                               read_only_paths=[str(tmp_path), sys.prefix])
    return {"type": "stdio", "server": "tiny"}


@pytest.fixture
def tiny_http_server(allow_loopback):
    """The same tiny server over streamable HTTP, served by uvicorn in a thread."""
    from mcp.server.fastmcp import FastMCP

    app = FastMCP("tiny-http", stateless_http=True, json_response=True)

    @app.tool()
    def whisper(text: str) -> str:
        """Lower-case the text."""
        return text.lower()

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app.streamable_http_app(), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_until(lambda: server.started, describe="the tiny http server starting")
    yield {"type": "http", "url": f"http://127.0.0.1:{port}/mcp"}
    server.should_exit = True
    thread.join(10)
