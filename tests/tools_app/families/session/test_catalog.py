"""The fourteen session tools as the catalog offers them."""
import pytest

from sessions_app.models import Chat
from tools_app.catalog.catalog import Caller, sessionless_tools
from tools_app.catalog.host_tools import REGISTRY
from tools_app.catalog.loader import catalog_for_chat
from tools_app.catalog.validation import ToolRefusal

FOURTEEN = ["list_sessions", "list_agents", "list_models", "get_current_session", "get_session_context",
            "send_message", "create_session", "create_chat", "rename_chat", "archive_chat", "set_workspace",
            "isolate_session", "delete_session", "move_session"]
SESSIONLESS = {"list_sessions", "list_agents", "list_models", "get_session_context", "create_session", "create_chat",
               "rename_chat", "send_message", "archive_chat", "delete_session", "move_session"}


def session_tools():
    return [t for t in REGISTRY.tools if t.group == "session"]


def test_it_registers_the_fourteen_in_the_session_group():
    assert [t.name for t in session_tools()] == FOURTEEN


def test_it_marks_eleven_sessionless_with_their_grants():
    grants = {t.name: t.grant for t in session_tools() if t.sessionless}
    assert set(grants) == SESSIONLESS
    assert {n for n, g in grants.items() if g == "session:read"} == {
        "list_sessions", "list_agents", "list_models", "get_session_context"}
    guest = [b.tool.name for b in sessionless_tools(REGISTRY.tools, Caller(grants=("session:read",)))]
    assert set(guest) == {"list_sessions", "list_agents", "list_models", "get_session_context"}


def test_it_offers_isolate_session_only_to_an_agent_keeping_a_folder_per_chat(make_place, worktree_agent):
    assert "isolate_session" not in catalog_for_chat(make_place().chat).names
    assert "isolate_session" in catalog_for_chat(make_place(provider=worktree_agent).chat).names


def test_it_never_offers_isolate_session_to_a_worker_chat(make_place, worktree_agent):
    place = make_place(provider=worktree_agent)
    worker = Chat.objects.create(session=place.session, origin_kind="tool", origin_chat=place.chat,
                                 origin_tool_call_id="c1")
    snapshot = catalog_for_chat(worker)
    assert "isolate_session" not in snapshot.names and "isolate_session" in snapshot.withheld_from_tool_chats


def test_it_defers_the_rarer_tools(place):
    deferred = catalog_for_chat(place.chat).deferred
    assert {"list_agents", "create_chat", "move_session"} <= deferred
    assert "list_sessions" not in deferred and "create_session" not in deferred


def test_rename_chat_follows_the_title_strategy_deferred_unless_configured(place):
    def properties():
        definition = next(d for d in catalog_for_chat(place.chat).definitions if d["name"] == "rename_chat")
        return set(definition["inputSchema"]["properties"])

    assert properties() == {"session", "chat", "title"}
    with pytest.raises(ToolRefusal) as refused:  # what was not offered is not taken either
        catalog_for_chat(place.chat).check_input("rename_chat", {"title": "t", "automatic": True})
    assert refused.value.sentence == ("Invalid input for rename_chat at /: Additional properties are not allowed "
                                      "('automatic' was unexpected)")
    place.session.config = {"titleStrategy": "agent"}
    place.session.save()
    assert properties() == {"session", "chat", "title", "automatic"}
    place.session.config = {"titleStrategy": "utility"}
    place.session.save()
    assert "rename_chat" not in catalog_for_chat(place.chat).names


def test_create_session_offers_the_agents_the_host_can_start_as_an_enum(place, worktree_agent, no_agent_programs,
                                                                       monkeypatch):
    """acp without an operator's command, claude and github-copilot without their CLIs cannot start here."""
    definition = next(d for d in catalog_for_chat(place.chat).definitions if d["name"] == "create_session")
    agent = definition["inputSchema"]["properties"]["agent"]
    assert agent["enum"] == ["echo", worktree_agent]
    assert agent["description"] == ("The agent (provider id) to start: `echo` (Echo), `echo-worktree` (Echo (worktrees)); "
                                    "see list_agents.")
    monkeypatch.setenv("AHP_ACP_AGENT_COMMAND", "/usr/bin/true")
    definition = next(d for d in catalog_for_chat(place.chat).definitions if d["name"] == "create_session")
    assert definition["inputSchema"]["properties"]["agent"]["enum"] == ["echo", "acp", worktree_agent]
    assert definition["inputSchema"]["required"] == ["prompt", "title"]  # relationship defaults to currentSession
