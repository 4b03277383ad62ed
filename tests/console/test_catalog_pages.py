"""The explainer's admin pages: a session's chats, and a preview for a session not yet created."""
import html
import uuid

import pytest

from sessions_app.actions import do_create_session
from tools_app.catalog.host_tools import PLUGINS
from tools_app.catalog.registry import Tool
from tools_app.models import HostConfig

from .test_catalog_explainer import ADVANCED_HIDDEN


@pytest.fixture
def advanced_plugin_tool():
    PLUGINS.set_tools([Tool("deploy", description="Deploy the workspace", advanced_permission=True)])
    yield
    PLUGINS.set_tools([])


def row(page, name):
    start = page.index(f'data-tool="{name}"')
    return html.unescape(page[start:page.index("</tr>", start)])


def test_the_session_page_says_why_a_tool_is_hidden(acme, tenant_admin, advanced_plugin_tool):
    session = do_create_session(acme.principal("member"), uuid.uuid4())
    change = tenant_admin.get(f"/admin/sessions_app/session/{session.pk}/change/").content.decode()
    assert f"/console/sessions/{session.pk}/catalog" in change
    page = tenant_admin.get(f"/console/sessions/{session.pk}/catalog").content.decode()
    assert "hidden" in row(page, "deploy") and ADVANCED_HIDDEN in row(page, "deploy")
    assert "offered" in row(page, "list_sessions")
    assert page.index("<h2>Offered (") < page.index("<h2>Hidden (")  # what the model sees first, as the README shows


def test_another_tenants_session_does_not_exist_for_them(globex, tenant_admin):
    session = do_create_session(globex.principal("member"), uuid.uuid4())
    assert tenant_admin.get(f"/console/sessions/{session.pk}/catalog").status_code == 404
    assert tenant_admin.get(f"/console/{globex.tenant.slug}/catalog").status_code == 404


@pytest.fixture
def user_chats_plugin_tool():
    PLUGINS.set_tools([Tool("ask_person", availability="userChats")])
    yield
    PLUGINS.set_tools([])


def test_the_preview_answers_for_a_provider_and_a_tool_started_chat(acme, tenant_admin, user_chats_plugin_tool):
    config = HostConfig.for_tenant(acme.tenant)
    config.session_tools_providers = ["acp"]
    config.save()
    page = tenant_admin.get(f"/console/{acme.tenant.slug}/catalog?provider=echo&origin=user").content.decode()
    assert ("list_sessions is a session tool, and sessionToolsProviders does not include this session's provider "
            "echo.") in row(page, "list_sessions")
    page = tenant_admin.get(f"/console/{acme.tenant.slug}/catalog?provider=acp&origin=tool").content.decode()
    assert "offered" in row(page, "list_sessions")
    assert ("ask_person is only offered in chats a person started, and this chat was started by a tool."
            in row(page, "ask_person"))


def test_the_landing_page_answers_without_a_login(client, db):
    page = client.get("/", HTTP_HOST="127.0.0.1:8000")
    assert page.status_code == 200
    text = page.content.decode()
    for shown in ('href="/admin/"', 'href="/api/v1/docs/"', 'href="/healthz"', "ws://127.0.0.1:8000/ahp",
                  "http://127.0.0.1:8000/ahp-mcp/&lt;session uuid&gt;", "make run", "make test"):
        assert shown in text


def test_the_admin_index_has_one_operators_console_section_with_its_pages(tenant_admin):
    page = tenant_admin.get("/admin/").content.decode()
    assert page.count(">Operators&#x27; console<") + page.count(">Operators' console<") == 1
    assert 'href="/console/"' in page and 'href="/api/v1/docs/"' in page


def test_the_preview_shows_a_servers_newest_listing_with_the_tools_it_drops(acme, tenant_admin):
    from tools_app.families.mcp_servers.models import SessionMcpServers

    config = HostConfig.for_tenant(acme.tenant)
    config.mcp_servers = {"wiki": {"type": "http", "url": "https://wiki.example/mcp"},
                          "docs": {"type": "http", "url": "https://docs.example/mcp"}}
    config.save()
    session = do_create_session(acme.principal("member"), uuid.uuid4())
    SessionMcpServers.objects.update_or_create(session=session, defaults={
        "servers": config.mcp_servers,
        "server_tools": {"wiki": {"tools": [{"name": "search"}, {"name": "find pages"}]},
                         "docs": {"error": "ConnectError: connection refused"}}})
    page = tenant_admin.get(f"/console/{acme.tenant.slug}/catalog?provider=echo&origin=user").content.decode()
    dropped = row(page, "wiki_find pages")
    assert "MCP server wiki" in dropped and "dropped" in dropped
    assert ("Dropped: MCP server wiki lists 'find pages', which the host cannot offer (Tool name 'wiki_find pages' "
            "must match ^[A-Za-z0-9_-]{1,64}$).") in dropped
    listed = html.unescape(page[page.index('data-server="wiki"'):])
    assert "Listed 1 tool(s); a new session offers them once it lists them. Dropped 1, with the reason: " \
           "wiki_find pages." in listed.split("</tr>")[0]
    failed = html.unescape(page[page.index('data-server="docs"'):]).split("</tr>")[0]
    assert "tool-hidden" in page[page.index('data-server="docs"') - 40:page.index('data-server="docs"')]
    assert "Failed: ConnectError: connection refused. None of its tools are offered." in failed
    assert "As a session listed it at " in failed
