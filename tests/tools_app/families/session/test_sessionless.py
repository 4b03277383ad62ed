"""Sessionless callers: `POST /api/v1/tools/<name>` with a bearer token."""
import json

import pytest
from rest_framework.test import APIClient

from console.models import AuditEntry
from sessions_app.models import Chat, OrchestrationCharge, Session
from tools_app.catalog.host_tools import PLUGINS
from tools_app.catalog.registry import Tool

from .conftest import Place


def post(token, name, body=None):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client.post(f"/api/v1/tools/{name}", body or {}, format="json")


def test_a_member_creates_a_session_that_is_theirs_with_no_parent(acme):
    answer = post(acme.tokens["member"], "create_session", {"relationship": "independent", "prompt": "p", "title": "t"})
    assert answer.status_code == 200
    session = Session.objects.get(pk=answer.json()["result"]["content"][0]["text"].split('"session": "')[1][13:49])
    assert (session.owner, session.parent) == (acme.member, None)
    assert OrchestrationCharge.objects.count() == 0


def test_a_guest_reads_but_is_refused_writes(acme):
    assert post(acme.tokens["guest"], "list_sessions").status_code == 200
    refused = post(acme.tokens["guest"], "send_message", {"session": "x", "message": "m"})
    assert (refused.status_code, refused.json()) == (403, {"error": "acme-guest may not session:write here"})


def test_root_may_call_every_sessionless_tool(acme):
    place = Place(acme)
    answer = post(acme.tokens["root"], "create_chat", {"session": place.session.uri, "title": "from root"})
    assert answer.status_code == 200 and Chat.objects.filter(title="from root").exists()


def test_current_session_is_refused_without_a_calling_session(acme):
    refused = post(acme.tokens["member"], "create_session", {"relationship": "currentSession", "prompt": "p",
                                                              "title": "t"})
    assert (refused.status_code, refused.json()["error"]) == (
        400, "currentSession needs a calling session; use independent")


@pytest.mark.parametrize("name,body", [
    ("create_chat", {"title": "t"}),
    ("rename_chat", {"title": "t"}),
])
def test_it_refuses_a_call_naming_no_session(acme, name, body):
    refused = post(acme.tokens["member"], name, body)
    assert (refused.status_code, refused.json()["error"]) == (
        400, f'{name} needs a session to act on when no session calls it; name one with "session".')


@pytest.mark.parametrize("name", ["send_message", "get_session_context"])
def test_the_schema_refuses_a_call_naming_no_session(acme, name):
    refused = post(acme.tokens["member"], name, {"message": "m"} if name == "send_message" else {})
    assert (refused.status_code, refused.json()["error"]) == (
        400, f"Invalid input for {name} at /: 'session' is a required property")


def test_session_bound_tools_have_no_sessionless_door(acme):
    refused = post(acme.tokens["root"], "get_current_session")
    assert (refused.status_code, refused.json()["error"]) == (
        404, 'No tool named "get_current_session" may be called without a session.')


def test_a_token_is_required(db):
    assert APIClient().post("/api/v1/tools/list_sessions", {}, format="json").status_code in (401, 403)


@pytest.mark.e2e  # a fresh production server process
def test_the_first_create_session_with_a_prompt_in_a_fresh_process_answers_and_runs_its_turn(acme, transactional_db):
    """In a fresh process no turn has run yet: the first turn a sessionless call starts must not
    run inside the request's own thread (it waited there on itself)."""
    import time

    import httpx

    from sessions_app.models import Turn

    from ....conftest import production_server

    with production_server() as port:
        started = time.monotonic()
        answer = httpx.post(f"http://127.0.0.1:{port}/api/v1/tools/create_session", timeout=30,
                            headers={"Authorization": f"Bearer {acme.tokens['member']}"},
                            json={"relationship": "independent", "prompt": "hello from nowhere", "title": "Fresh"})
        assert answer.status_code == 200 and time.monotonic() - started < 10
        deadline = time.monotonic() + 20
        while Turn.objects.filter(text="hello from nowhere", state="active").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        turn = Turn.objects.get(text="hello from nowhere")
        assert turn.state == "complete" and turn.response_parts[0]["content"] == "hello from nowhere"


def test_every_sessionless_call_is_audited_naming_the_person_and_no_session(acme, tenant_admin):
    assert post(acme.tokens["member"], "list_sessions").status_code == 200
    post(acme.tokens["guest"], "send_message", {"session": "x", "message": "m"})
    post(acme.tokens["member"], "nope")
    calls = AuditEntry.objects.for_tenant(acme.tenant).with_outcome().order_by("created")
    assert [(c.tool_name, c.caller, c.turn, c.outcome, c.refusal_reason) for c in calls] == [
        ("list_sessions", acme.member, None, "ok", ""),
        ("send_message", acme.guest, None, "refused", "grant"),
        ("nope", acme.member, None, "refused", "unknown_tool")]
    assert calls[1].result["error"]["message"] == "acme-guest may not session:write here"
    page = tenant_admin.get("/admin/console/auditentry/?reason=grant").content.decode()
    assert "acme-guest" in page and "none (sessionless)" in page
    export = tenant_admin.get("/admin/console/auditentry/export.csv").content.decode()
    assert "acme-member,,,list_sessions" in export


def test_a_sessionless_call_respects_is_enabled_for_session(acme):
    PLUGINS.set_tools([Tool("session_only", sessionless=True, executor=lambda context, arguments: "ran",
                            is_enabled_for_session=lambda session: session is not None)])
    try:
        refused = post(acme.tokens["member"], "session_only")
    finally:
        PLUGINS.set_tools([])
    assert (refused.status_code, refused.json()["error"]) == (
        403, "session_only is not enabled without a session: its isEnabledForSession check said no.")
    call = AuditEntry.objects.for_tenant(acme.tenant).with_outcome().get()
    assert (call.outcome, call.refusal_reason) == ("refused", "availability")


def test_a_sessionless_create_session_without_a_relationship_makes_a_session_of_its_own(acme):
    answer = post(acme.tokens["member"], "create_session", {"title": "t", "prompt": "p"})
    assert answer.status_code == 200
    assert json.loads(answer.json()["text"])["relationship"] == "independent"
