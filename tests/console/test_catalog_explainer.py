"""The catalog explainer over REST: every tool of every source for a session's chat, offered or
hidden with the sentence of the rule that hid it, for people who may read the session."""
import uuid

import pytest
from rest_framework.test import APIClient

from sessions_app.actions import do_create_session
from tools_app.catalog.host_tools import PLUGINS
from tools_app.catalog.registry import Tool
from tools_app.models import HostConfig

ADVANCED_HIDDEN = "deploy needs advanced permission, and advancedTools is off for this tenant."


def api(token):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


@pytest.fixture
def advanced_plugin_tool():
    PLUGINS.set_tools([Tool("deploy", description="Deploy the workspace", advanced_permission=True)])
    yield
    PLUGINS.set_tools([])


@pytest.fixture
def session(acme):
    return do_create_session(acme.principal("member"), uuid.uuid4())


def tool(explained, name):
    return next(t for t in explained["tools"] if t["name"] == name)


def test_it_shows_an_advanced_tool_hidden_and_then_offered(acme, session, advanced_plugin_tool):
    url = f"/api/v1/sessions/{session.id}/catalog"
    explained = api(acme.tokens["guest"]).get(url).json()
    assert explained["chat"] == str(session.chats.get(is_default=True).id)
    assert tool(explained, "deploy") == {"name": "deploy", "source": "plugin", "label": "plugin", "offered": False,
                                         "reasons": [ADVANCED_HIDDEN], "reason": ADVANCED_HIDDEN}
    assert tool(explained, "list_sessions")["offered"] is True
    config = HostConfig.for_tenant(acme.tenant)
    config.advanced_tools = True
    config.save()
    assert tool(api(acme.tokens["guest"]).get(url).json(), "deploy") == {
        "name": "deploy", "source": "plugin", "label": "plugin", "offered": True, "deferred": False, "reasons": []}


def test_it_explains_the_session_tool_scoping_of_the_chat_named(acme, session):
    config = HostConfig.for_tenant(acme.tenant)
    config.session_tools_providers = ["claude"]
    config.save()
    chat = session.chats.get(is_default=True)
    explained = api(acme.tokens["member"]).get(f"/api/v1/sessions/{session.id}/catalog?chat={chat.id}").json()
    assert tool(explained, "list_sessions")["reason"] == (
        "list_sessions is a session tool, and sessionToolsProviders does not include this session's provider echo.")


def test_a_signed_in_outsider_gets_404(globex, session):
    response = api(globex.tokens["admin"]).get(f"/api/v1/sessions/{session.id}/catalog")
    assert (response.status_code, response.json()) == (404, {"detail": "No Session matches the given query."})


def test_a_chat_not_of_the_session_is_refused(acme, session):
    other = do_create_session(acme.principal("member"), uuid.uuid4()).chats.get(is_default=True)
    client = api(acme.tokens["member"])
    response = client.get(f"/api/v1/sessions/{session.id}/catalog?chat={other.id}")
    assert (response.status_code, response.json()) == (
        404, {"error": "chat must be the id (a UUID) of one of this session's chats."})
    response = client.get(f"/api/v1/sessions/{session.id}/catalog?chat=nope")
    assert (response.status_code, response.json()) == (
        400, {"error": "chat must be the id (a UUID) of one of this session's chats."})


def test_it_refuses_a_call_without_a_token(session):
    assert APIClient().get(f"/api/v1/sessions/{session.id}/catalog").status_code == 401


def test_it_gives_every_rule_that_hides_a_tool_and_explains_deferred_and_a_tools_own_check(acme):
    from console.explainer import DEFERRED, explain_preview

    config = HostConfig.for_tenant(acme.tenant)
    config.session_tools_providers = ["claude"]
    config.save()
    explained = explain_preview(acme.tenant, "echo", "tool")
    assert tool(explained, "isolate_session")["reasons"] == [
        "isolate_session is a session tool, and sessionToolsProviders does not include this session's provider echo.",
        "isolate_session is not offered in this session: the tool's own check for the session said no. "
        "Offered only where the session's provider keeps a folder per chat."]
    preview = explain_preview(acme.tenant, "claude")
    assert tool(preview, "create_chat")["deferred"] is True and preview["deferred_means"] == DEFERRED
    assert DEFERRED == ("Offered, marked deferred: a hint that the model may load its full definition on demand; "
                        "every provider of this host receives it like any other tool.")


def test_a_tool_hidden_by_two_switches_names_both(acme):
    from console.explainer import explain_preview

    PLUGINS.set_tools([Tool("deploy", advanced_permission=True, availability="userChats")])
    try:
        assert tool(explain_preview(acme.tenant, "echo", "tool"), "deploy")["reasons"] == [
            ADVANCED_HIDDEN, "deploy is only offered in chats a person started, and this chat was started by a tool."]
    finally:
        PLUGINS.set_tools([])


def test_it_lists_the_cli_built_ins_each_harness_hands_its_model(acme):
    from console.explainer import explain_preview

    assert [(b["name"], b["label"], b["offered"]) for b in explain_preview(acme.tenant, "claude")["builtins"]] == [
        ("Agent", "CLI built-in", True)]
    assert [b["name"] for b in explain_preview(acme.tenant, "github-copilot")["builtins"]] == ["task"]
    assert explain_preview(acme.tenant, "echo")["builtins"] == []


def test_it_says_which_mcp_server_failed_and_why_and_which_entry_was_left_out(acme, session):
    from tools_app.families.mcp_servers.models import SessionMcpServers

    config = HostConfig.for_tenant(acme.tenant)
    config.mcp_servers = {"docs": {"type": "http", "url": "https://docs.example/mcp"},
                          "wiki": {"type": "http", "url": "https://wiki.example/mcp"},
                          "old": {"type": "http", "url": "ftp://old.example/"}}
    config.save()
    SessionMcpServers.objects.update_or_create(session=session, defaults={
        "servers": {"docs": config.mcp_servers["docs"], "wiki": config.mcp_servers["wiki"]},
        "server_tools": {"docs": {"error": "connection refused"},
                         "wiki": {"tools": [{"name": "search", "description": "Search the wiki"}]}}})
    explained = api(acme.tokens["member"]).get(f"/api/v1/sessions/{session.id}/catalog").json()
    assert explained["servers"] == [
        {"name": "docs", "state": "Failed: connection refused. None of its tools are offered.", "failed": True},
        {"name": "old", "state": 'Left out: mcpServers.old is not usable (an http entry needs an http(s) "url"); '
                                 "none of its tools are offered.", "failed": True},
        {"name": "wiki", "state": "Listed 1 tool(s); they are in the catalog above.", "failed": False}]
    assert tool(explained, "wiki_search")["label"] == "MCP server wiki"


def test_a_disconnected_clients_tools_are_shown_with_the_time_they_stay_until(acme, session):
    from datetime import timedelta

    from django.utils import timezone

    from console.explainer import explain_chat
    from sessions_app.models import ActiveClient

    release = timezone.now().replace(microsecond=0) + timedelta(seconds=30)
    ActiveClient.objects.create(session=session, client_id="ide", owner=acme.member, release_at=release, tools=[
        {"name": "pick", "description": "Pick a file", "inputSchema": {"type": "object", "properties": {}}}])
    explained = explain_chat(session.chats.get(is_default=True))
    assert tool(explained, "ide__pick")["label"] == f"client ide (disconnected; its tools stay until {release:%H:%M:%S})"


def test_a_listed_tool_the_catalog_drops_is_shown_dropped_with_the_reason(acme, session):
    from tools_app.families.mcp_servers.models import SessionMcpServers

    config = HostConfig.for_tenant(acme.tenant)
    config.mcp_servers = {"wiki": {"type": "http", "url": "https://wiki.example/mcp"}}
    config.save()
    SessionMcpServers.objects.update_or_create(session=session, defaults={
        "servers": config.mcp_servers,
        "server_tools": {"wiki": {"tools": [{"name": "search"}, {"name": "find pages"}]}}})
    explained = api(acme.tokens["member"]).get(f"/api/v1/sessions/{session.id}/catalog").json()
    assert explained["servers"] == [{"name": "wiki", "failed": False, "state": (
        "Listed 1 tool(s); they are in the catalog above. Dropped 1, with the reason: wiki_find pages.")}]
    assert tool(explained, "wiki_search")["offered"] is True
    dropped = tool(explained, "wiki_find pages")
    assert (dropped["source"], dropped["label"], dropped["offered"]) == ("mcp", "MCP server wiki", False)
    assert dropped["reason"] == ("Dropped: MCP server wiki lists 'find pages', which the host cannot offer (Tool name "
                                 "'wiki_find pages' must match ^[A-Za-z0-9_-]{1,64}$).")
