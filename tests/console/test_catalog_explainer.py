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
    assert tool(explained, "deploy") == {"name": "deploy", "source": "plugin", "offered": False,
                                         "reason": ADVANCED_HIDDEN}
    assert tool(explained, "list_sessions")["offered"] is True
    config = HostConfig.for_tenant(acme.tenant)
    config.advanced_tools = True
    config.save()
    assert tool(api(acme.tokens["guest"]).get(url).json(), "deploy") == {
        "name": "deploy", "source": "plugin", "offered": True, "deferred": False}


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
