import json
import sys
import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from tools_app.admin import PluginsField
from tools_app.agent_connection_rows import EDITED as CONNECTION_FIELDS
from tools_app.agent_connection_rows import to_rows as to_connection_rows
from tools_app.config import HostConfig, wire_values
from tools_app.families.mcp_servers.forms import to_rows
from tools_app.models import StdioServer

from ..agents.model_server import model  # noqa: F401  (a fixture)
from .browser import chromium


def _rows(prefix, defaults, rows, initial):
    """Rows as the admin's form posts them: one dict of row fields each, then the empty row."""
    form = {f"{prefix}-TOTAL_FORMS": len(rows) + 1, f"{prefix}-INITIAL_FORMS": initial,
            f"{prefix}-MIN_NUM_FORMS": 0, f"{prefix}-MAX_NUM_FORMS": 1000}
    form.update({f"{prefix}-{len(rows)}-{name}": value for name, value in defaults.items() if value})
    for i, row in enumerate(rows):
        row = {**defaults, "other": None, **row}
        form.update({f"{prefix}-{i}-{name}": json.dumps(value) if name == "other" else value
                     for name, value in row.items() if value is not False})
    return form


def server_rows(*rows, initial=0):
    return _rows("mcpServers", {"type": "stdio", "server": "", "url": "", "headers": "", "env": ""}, rows, initial)


def connection_rows(*rows, initial=0):
    return _rows("agentConnections", {"provider": "", **dict.fromkeys(CONNECTION_FIELDS, "")}, rows, initial)


def host_config_form(tenant, mcp_rows=None, agent_rows=None, **changes):
    """The admin's HostConfig form as a browser would post it, with `changes` (form field names)
    and the mcpServers and agentConnections rows as the page shows them unless given."""
    values = wire_values(HostConfig.for_tenant(tenant))
    shown = to_rows(values["mcpServers"])
    connections = to_connection_rows(values["agentConnections"])
    form = {
        "sessionTools": values["sessionTools"],
        "sessionToolsProviders": values["sessionToolsProviders"],
        "advancedTools": values["advancedTools"],
        **(mcp_rows if mcp_rows is not None else server_rows(*shown, initial=len(shown))),
        "clientToolTimeoutMs": values["clientToolTimeoutMs"],
        "clientToolCallDisconnectTimeoutMs": values["clientToolCallDisconnectTimeoutMs"],
        "agentOrchestrationLimits": values["agentOrchestrationLimits"],
        "agentOrchestrationLimitsScope": values["agentOrchestrationLimitsScope"],
        "chatMovesEnabled": values["chatMoves.enabled"],
        "plugins": PluginsField().prepare_value(values["plugins"]) or [],
        **(agent_rows if agent_rows is not None else connection_rows(*connections, initial=len(connections))),
        **changes,
    }
    # An unticked checkbox is simply not sent.
    return {k: ("on" if v is True else v) for k, v in form.items() if v is not False}


def change_url(tenant):
    return f"/admin/tools_app/hostconfig/{HostConfig.for_tenant(tenant).pk}/change/"


class Work:
    """Sessions, chats, turns and tool calls of a tenant, made by the host's own writers."""

    def __init__(self, people):
        self.people = people

    def session(self, parent=None, person="member"):
        from sessions_app.actions import do_create_session

        return do_create_session(self.people.principal(person), uuid.uuid4(), parent=parent)

    def turn(self, session, person="member"):
        from sessions_app.models import Turn

        chat = session.chats.get(is_default=True)
        return Turn.objects.create(chat=chat, sender=getattr(self.people, person) if person else None, text="go")

    def refused(self, turn, sentence, tool="some_tool"):
        from sessions_app.actions import do_refuse_tool_call

        do_refuse_tool_call(turn, tool, {}, sentence)

    def ran(self, turn, tool="lint", source="host", success=True):
        from sessions_app.actions import do_begin_tool_call, do_complete_tool_call, failure

        call = do_begin_tool_call(turn, tool, {"path": "."}, source=source)
        result = ({"success": True, "pastTenseMessage": f"Ran {tool}", "content": []} if success
                  else failure(tool, f"{tool} raised ValueError: bad"))
        do_complete_tool_call(call.id, result)
        return call

    def client_call(self, turn, tool="pick", timeout_ms=1000):
        from sessions_app.actions import do_begin_tool_call

        return do_begin_tool_call(turn, tool, {}, client_id="ide", timeout_ms=timeout_ms)

    def timed_out(self, turn, tool="pick"):
        from sessions_app.actions import do_expire_tool_call
        from sessions_app.models import ToolCall

        call = self.client_call(turn, tool)
        ToolCall.objects.filter(pk=call.pk).update(deadline=timezone.now() - timedelta(seconds=1))
        assert do_expire_tool_call(call.id)
        return call


@pytest.fixture
def acme_work(acme):
    return Work(acme)


SENTENCES = {
    "grant": "acme-guest may not chat:tool here",
    "limit": "Refusing to create a session: recursion limit reached (max spawn depth 3). "
             "This session was itself created 3 level(s) deep.",
    "availability": "ide__pick is only available in chats a person started, not in this tool-started chat.",
    "unknown_tool": 'No tool named "nope" is available in this chat.',
}


OPERATOR_PASSWORD = "correct horse battery staple"


@pytest.fixture
def operator(acme):
    """acme's admin, signed in to the admin as staff with a known password."""
    acme.admin.is_staff = True
    acme.admin.set_password(OPERATOR_PASSWORD)
    acme.admin.save()
    return acme.admin


TINY_SERVER = '''
from mcp.server.fastmcp import FastMCP

app = FastMCP("tiny")


@app.tool()
def shout(text: str) -> str:
    """Upper-case the text."""
    return text.upper()


app.run()
'''


@pytest.fixture
def tiny_stdio_server(tmp_path, transactional_db):
    """A real stdio MCP server the operator defines; a check runs it in a sandbox."""
    script = tmp_path / "tiny_server.py"
    script.write_text(TINY_SERVER)
    tmp_path.chmod(0o755)  # the sandbox's user reads the operator's program
    return StdioServer.objects.create(name="tiny", command=sys.executable, args=[str(script)],
                                      read_only_paths=[str(tmp_path), sys.prefix])


@pytest.fixture
def browser():
    """Headless Chromium at the live page's size."""
    with chromium(1280, 1000) as driver:
        yield driver
