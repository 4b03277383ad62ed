"""The per-session MCP tools endpoint against a bare `mcp` SDK server, in the same run.

Both are served by uvicorn in a thread of this process over real sockets and driven by the
official `mcp` client: `tools/list`, then `tools/call` of a cheap host tool (`add`). The host
side is the whole path: token check, the session's catalog, the call recorded in the chat (in
the one turn the host begins for an attached agent while it keeps calling: after the first,
every call joins it). The bare server offers the same tool definitions and answers from memory,
stateless with JSON responses like the endpoint. The durable floor is the same bare server whose
`add` first does what recording a call needs at least: two transactions (its begin and its
completion, each one INSERT) on the host's database, through the host's ORM threads. Beside the
ratios: the SQL statements the host ran per `tools/call` (savepoints counted apart).

Run: `.venv/bin/python -m bench.mcp_endpoint` (embedded, a throwaway SQLite), or with
DATABASE_URL (and REDIS_URL) set to measure on that database (a tenant of its own there).
Target: the endpoint as fast as the bare server (ratio <= 1.0x).
"""
import asyncio
import collections
import contextlib
import os
import tempfile
import threading
import time
import uuid

REQUESTS = 300
ROUNDS = 10
TARGET = 1.0


def add(context, arguments):
    return str(arguments["a"] + arguments["b"])


ADD_SCHEMA = {"type": "object", "required": ["a", "b"],
              "properties": {"a": {"type": "number"}, "b": {"type": "number"}}}


def setup_django(var_dir):
    # The database DATABASE_URL names (a tenant of its own there), or a throwaway embedded install.
    os.environ["AHP_VAR_DIR"] = var_dir
    os.environ.setdefault("DATABASE_URL", f"sqlite:///{var_dir}/bench.sqlite3")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ahp.settings")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0, interactive=False)
    from django.db import connection

    return connection.vendor


class StatementCount:
    """SQL statements run on every database connection opened from now on, while `counting`."""

    def __init__(self):
        from django.db import connections
        from django.db.backends.signals import connection_created

        self.counting = False
        self.counts = collections.Counter()
        self.lock = threading.Lock()
        connection_created.connect(self.wrap, weak=False)
        connections.close_all()  # the connections already open reconnect, wrapped

    def wrap(self, sender, connection, **kwargs):
        connection.execute_wrappers.append(self)

    def __call__(self, execute, sql, params, many, context):
        if self.counting:
            with self.lock:
                self.counts["savepoint" if "SAVEPOINT" in sql else "statement"] += 1
        return execute(sql, params, many, context)


def host_session():
    """A member's session with the endpoint open and `add` registered as a host tool."""
    from django.contrib.auth import get_user_model

    from grants.actions import do_add_member, do_create_tenant, do_mint_token
    from grants.models import Principal
    from sessions_app.actions import do_create_session, do_open_tools_endpoint
    from tools_app.catalog.host_tools import REGISTRY
    from tools_app.catalog.registry import Tool

    REGISTRY.register(lambda editor: editor.add(Tool("add", description="Add two numbers", executor=add,
                                                     input_schema=ADD_SCHEMA)), label="bench")
    tenant = do_create_tenant(f"bench-{uuid.uuid4().hex[:6]}")
    do_add_member(tenant, f"bencher-{tenant.slug}", "member")
    person = get_user_model().objects.get(username=f"bencher-{tenant.slug}")
    principal = Principal.for_person(tenant, person)
    session = do_create_session(principal, uuid.uuid4())
    endpoint = do_open_tools_endpoint(principal, session, do_mint_token(tenant, person=person)[0])
    return session, endpoint


def bare_app(definitions, durable=False):
    """A bare SDK server offering the same definitions, answering `add` from memory; `durable`:
    after two transactions."""
    from mcp import types
    from mcp.server.lowlevel import Server
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

    from kernel.orm import database_sync_to_async

    from .echo_asgi import durable_write

    server = Server("bare")
    tools = [types.Tool.model_validate(d) for d in definitions]

    @server.list_tools()
    async def list_tools():
        return tools

    @server.call_tool(validate_input=False)
    async def call_tool(name, arguments):
        if durable:
            await database_sync_to_async(durable_write)()
            await database_sync_to_async(durable_write)()
        return [types.TextContent(type="text", text=str(arguments["a"] + arguments["b"]))]

    manager = StreamableHTTPSessionManager(server, stateless=True, json_response=True)

    async def app(scope, receive, send):
        if scope["type"] == "lifespan":
            message = await receive()
            async with manager.run():
                await send({"type": "lifespan.startup.complete"})
                message = await receive()
            assert message["type"] == "lifespan.shutdown"
            await send({"type": "lifespan.shutdown.complete"})
            return
        await manager.handle_request(scope, receive, send)

    return app


@contextlib.contextmanager
def serving(app, lifespan):
    import uvicorn

    from .servers import free_port

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan=lifespan))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.02)
    try:
        yield port
    finally:
        server.should_exit = True
        thread.join(10)


@contextlib.asynccontextmanager
async def mcp_session(url, token):
    import httpx
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx.AsyncClient(headers=headers, timeout=30) as http:
        async with streamable_http_client(url, http_client=http) as (read, write, _):
            async with ClientSession(read, write) as session:
                await session.initialize()
                yield session


async def list_tools(session, i):
    await session.list_tools()


async def call_add(session, i):
    result = await session.call_tool("add", {"a": i, "b": 1})
    assert result.content[0].text == str(i + 1), result


async def drive(servers, statements):
    """Requests per second of each server (name -> (url, token)), for tools/list then tools/call,
    measured in alternating rounds so all see the same machine (its load changes from second to
    second). The durable floor differs from the bare server only in its calls."""
    async with contextlib.AsyncExitStack() as stack:
        sessions = {name: await stack.enter_async_context(mcp_session(url, token))
                    for name, (url, token) in servers.items()}
        for i in range(20):  # warm up
            for session in sessions.values():
                await list_tools(session, i)
                await call_add(session, i)
        rates = {}
        for request in (list_tools, call_add):
            measured = [name for name in sessions if request is call_add or name != "durable"]
            elapsed = dict.fromkeys(measured, 0.0)
            for _ in range(ROUNDS):
                for name in measured:
                    statements.counting = name == "host" and request is call_add
                    start = time.perf_counter()
                    for i in range(REQUESTS // ROUNDS):
                        await request(sessions[name], i)
                    elapsed[name] += time.perf_counter() - start
                    statements.counting = False
            rates[request] = {name: REQUESTS / seconds for name, seconds in elapsed.items()}
        return rates


def main():
    with tempfile.TemporaryDirectory() as var_dir:
        vendor = setup_django(var_dir)
        from ahp.asgi import application
        from ahp.mcp.endpoint import tool_definitions

        session, endpoint = host_session()
        definitions = tool_definitions(session.id)
        statements = StatementCount()
        with (serving(application, "off") as host_port, serving(bare_app(definitions), "on") as bare_port,
              serving(bare_app(definitions, durable=True), "on") as durable_port):
            rates = asyncio.run(drive({"host": (f"http://127.0.0.1:{host_port}{endpoint.path}", endpoint.token),
                                       "bare": (f"http://127.0.0.1:{bare_port}/mcp", None),
                                       "durable": (f"http://127.0.0.1:{durable_port}/mcp", None)}, statements))
    print(f"{len(definitions)} tools offered, host on {vendor}; {REQUESTS} requests each in {ROUNDS} alternating "
          f"rounds, one client, sequential")
    for label, request in (("tools/list", list_tools), ("tools/call add", call_add)):
        ours, floor = rates[request]["host"], rates[request]["bare"]
        ratio = floor / ours
        verdict = "within" if ratio <= TARGET else "OVER"
        print(f"{label:15} endpoint {ours:8.1f} req/s   bare SDK server {floor:8.1f} req/s   "
              f"ratio {ratio:.2f}x ({verdict} the {TARGET:.1f}x target)")
    durable = rates[call_add]["durable"]
    print(f"{'':15} durable floor {durable:8.1f} req/s (the bare server after two transactions)   "
          f"endpoint / durable floor {durable / rates[call_add]['host']:.2f}x")
    print(f"host SQL per tools/call: {statements.counts['statement'] / REQUESTS:.1f} statements "
          f"and {statements.counts['savepoint'] / REQUESTS:.1f} savepoint statements")


if __name__ == "__main__":
    main()
