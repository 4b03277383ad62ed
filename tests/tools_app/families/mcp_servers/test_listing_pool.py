"""Session starts never spawn listings without bound: a process lists at most `workers`
sessions' servers at once, and a session already waiting is not queued twice."""
import sys
import textwrap
import uuid
from pathlib import Path

from django.conf import settings

from tools_app.families.mcp_servers.server_tools import ListingPool
from tools_app.models import SessionMcpServers, StdioServer
from tools_app.sessions import do_start_session

SLOW_SERVER = textwrap.dedent('''
    import time
    from mcp.server.fastmcp import FastMCP

    with open("started", "w") as f:  # in the session's own folder, its working directory
        f.write(repr(time.time()))
    time.sleep(0.6)
    app = FastMCP("slow")

    @app.tool()
    def nap() -> str:
        return "z"

    app.run()
''')


def test_at_most_two_listings_run_at_once_and_a_waiting_session_is_queued_once(acme, tmp_path, transactional_db):
    script = tmp_path / "slow.py"
    script.write_text(SLOW_SERVER)
    tmp_path.chmod(0o755)
    StdioServer.objects.create(name="slow", command=sys.executable, args=[str(script)],
                               read_only_paths=[str(tmp_path), sys.prefix])
    folders = []
    pool = ListingPool(workers=2)
    futures = []
    for _ in range(6):
        folder = Path(settings.AHP_WORKSPACE_ROOT) / "acme" / f"pool-{uuid.uuid4().hex[:8]}"
        folder.mkdir(parents=True)
        folders.append(folder)
        session = do_start_session(acme.principal("member"), uuid.uuid4(), working_directories=[folder.as_uri()])
        # Given the server after its start, so only this pool (not the process's own) lists it.
        SessionMcpServers.objects.filter(session=session).update(servers={"slow": {"type": "stdio", "server": "slow"}})
        futures.append(pool.submit(session.id))
    queued_twice = pool.submit(session.id)
    assert queued_twice is None  # the last one is still waiting behind the first two
    for future in futures:
        assert "tools" in future.result(60)["slow"]
    starts = sorted(float((folder / "started").read_text()) for folder in folders)
    assert all(starts[i + 2] - starts[i] >= 0.5 for i in range(len(starts) - 2)), starts
    assert SessionMcpServers.objects.filter(server_tools__has_key="slow").count() == 6
