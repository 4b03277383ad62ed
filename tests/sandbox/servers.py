"""Small real servers the outbound tests aim the host at: an MCP server over streamable HTTP,
and a plain HTTP server that answers every request with a redirect or a fixed body."""
import contextlib
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import uvicorn

from ..ahp.mcp.helpers import wait_until
from ..conftest import free_port


@contextlib.contextmanager
def mcp_server(address="127.0.0.1"):
    """A FastMCP server with one tool, `whisper`; yields (url, the requests it answered)."""
    from mcp.server.fastmcp import FastMCP

    app = FastMCP("outbound-target", stateless_http=True, json_response=True)
    seen = []

    @app.tool()
    def whisper(text: str) -> str:
        """Lower-case the text."""
        return text.lower()

    asgi = app.streamable_http_app()

    async def counting(scope, receive, send):
        if scope["type"] == "http":
            seen.append(scope["path"])
        await asgi(scope, receive, send)

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(counting, host=address, port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_until(lambda: server.started, describe=f"an MCP server on {address}")
    try:
        yield f"http://{address}:{port}/mcp", seen
    finally:
        server.should_exit = True
        thread.join(10)


@contextlib.contextmanager
def http_server(address="127.0.0.1", redirect_to=None, body=b"log text", status=200):
    """Answers every GET/POST with 307 to `redirect_to` (path kept), or `status` and `body`
    (None: the request's Host header); yields (base url, the paths it was asked for)."""
    seen = []

    class Handler(BaseHTTPRequestHandler):
        def answer(self):
            seen.append(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            self.rfile.read(length)
            if redirect_to:
                self.send_response(307)
                self.send_header("Location", redirect_to + self.path)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            answer = body if body is not None else self.headers["Host"].encode()
            self.send_response(status)
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        do_GET = do_POST = answer

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer((address, 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://{address}:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()
