"""Tenant isolation from every door: socket, MCP endpoint, REST (sessions, tools endpoint, the
sessionless tools door, agent definitions, config) and admin. A token of acme can never name,
list, subscribe to, call into or infer globex's sessions: each door answers "exists in another
tenant" exactly as it answers "does not exist" (with the name swapped)."""
import json
import re
import uuid

import httpx
import pytest
from django.test import Client
from rest_framework.test import APIClient

from tools_app.models import AgentDefinition

from ..ahp.protocol.harness import AhpClient, RpcFailed, default_chat

ROOT = "ahp-root://"


def same_answer(ask, theirs, nobodys):
    """`ask(uri)` answers alike for another tenant's thing and for one that does not exist."""
    one, other = ask(theirs), ask(nobodys)
    assert named_x(one, theirs) == named_x(other, nobodys), (one, other)
    return one


def named_x(answer, name):
    """The answer with `name` written X where it stands alone: a row id 4 is not the 4s of a 404."""
    return re.sub(rf"(?<![0-9A-Za-z]){re.escape(name)}(?![0-9A-Za-z])", "X", json.dumps(answer, ensure_ascii=False))


def rpc(client, method, params):
    try:
        return {"result": client.call(method, params)}
    except RpcFailed as failed:
        return {"error": [failed.code, failed.message]}


@pytest.fixture
def two_tenants(acme, globex, host):
    with AhpClient(host.port, acme.tokens["root"], "acme-app") as mine, \
            AhpClient(host.port, globex.tokens["member"], "globex-app") as theirs:
        session = theirs.create_session()
        chat = default_chat(theirs, session)
        yield mine, theirs, session, chat


def test_the_socket_answers_another_tenants_session_as_one_that_does_not_exist(two_tenants):
    mine, _, session, chat = two_tenants
    nobody_session, nobody_chat = f"ahp-session:/{uuid.uuid4()}", f"ahp-chat:/{uuid.uuid4()}"
    for uri, none in ((session, nobody_session), (chat, nobody_chat), (f"{session}/annotations",
                                                                       f"{nobody_session}/annotations")):
        assert "error" in same_answer(lambda u: rpc(mine, "subscribe", {"channel": u}), uri, none)
    same_answer(lambda u: rpc(mine, "disposeSession", {"channel": u}), session, nobody_session)
    same_answer(lambda u: rpc(mine, "createChat", {"channel": u, "chat": f"ahp-chat:/{uuid.uuid4()}"}),
                session, nobody_session)
    same_answer(lambda u: rpc(mine, "disposeChat", {"channel": u}), chat, nobody_chat)
    replayed = rpc(mine, "reconnect", {"clientId": "acme-app", "lastSeenServerSeq": 0,
                                       "subscriptions": [session, chat, nobody_session]})["result"]
    assert session not in json.dumps(replayed) or set(replayed.get("missing", ())) >= {session, chat}
    assert all(s["resource"] == ROOT for s in replayed.get("snapshots", ())) or replayed["type"] == "replay"
    assert rpc(mine, "listSessions", {"channel": ROOT})["result"]["items"] == []


def test_actions_on_another_tenants_channels_are_ignored_as_on_channels_that_do_not_exist(two_tenants):
    mine, _, session, chat = two_tenants
    nobody_session, nobody_chat = f"ahp-session:/{uuid.uuid4()}", f"ahp-chat:/{uuid.uuid4()}"
    turn = str(uuid.uuid4())
    attempts = [
        (session, nobody_session, {"type": "session/titleChanged", "title": "mine"}),
        (session, nobody_session, {"type": "session/isArchivedChanged", "isArchived": True}),
        (session, nobody_session, {"type": "session/activeClientSet",
                                   "activeClient": {"clientId": "acme-app", "tools": []}}),
        (chat, nobody_chat, {"type": "chat/turnStarted", "turnId": turn, "startedAt": "2026-01-01T00:00:00Z",
                             "message": {"text": "hi"}}),
        (chat, nobody_chat, {"type": "chat/toolCallComplete", "turnId": turn, "toolCallId": turn,
                             "result": {"success": True, "pastTenseMessage": "done"}}),
        (f"{session}/annotations", f"{nobody_session}/annotations",
         {"type": "annotations/removed", "annotationId": "a"}),
    ]
    for theirs, none, action in attempts:
        def heard(uri, action=action):
            mine.dispatch(uri, action)
            assert mine.call("ping", {"channel": ROOT}) is None  # answered after whatever the action caused
            return [n for n in mine.notifications if n.get("method") == "action"]

        assert same_answer(heard, theirs, none) == []


def test_another_tenants_session_news_never_reaches_a_root_subscriber(two_tenants):
    mine, theirs, session, _ = two_tenants
    mine.subscribe(ROOT)
    other = theirs.create_session()
    theirs.dispatch(other, {"type": "session/titleChanged", "title": "globex secret"})
    theirs.subscribe(other)
    theirs.dispatch(other, {"type": "session/isReadChanged", "isRead": True})
    theirs.action("session/isReadChanged")
    for _ in range(3):  # news is published after commit: give it every chance to (wrongly) arrive
        assert mine.call("ping", {"channel": ROOT}) is None
    assert not any(session in json.dumps(n) or other in json.dumps(n) or "globex" in json.dumps(n)
                   for n in mine.notifications)


def rest(token):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


def answer(response):
    return [response.status_code, response.content.decode()]


def test_rest_answers_another_tenants_session_as_one_that_does_not_exist(two_tenants, acme):
    _, _, session, chat = two_tenants
    session_id, nobody = session.split("/")[-1], str(uuid.uuid4())
    client = rest(acme.tokens["root"])
    assert same_answer(lambda i: answer(client.get(f"/api/v1/sessions/{i}")), session_id, nobody)[0] == 404
    assert same_answer(lambda i: answer(client.get(f"/api/v1/sessions/{i}/tools-endpoint")), session_id, nobody)[0] == 404
    assert client.get("/api/v1/sessions").json()["items"] == []
    nobody_chat = f"ahp-chat:/{uuid.uuid4()}"
    tool_calls = [
        ("get_session_context", session, f"ahp-session:/{nobody}", lambda u: {"session": u}),
        ("send_message", session, f"ahp-session:/{nobody}", lambda u: {"session": u, "message": "hi"}),
        ("delete_session", session, f"ahp-session:/{nobody}", lambda u: {"session": u}),
        ("rename_chat", chat, nobody_chat, lambda u: {"chat": u, "title": "mine"}),
        ("archive_chat", chat, nobody_chat, lambda u: {"chat": u}),
        ("move_session", session, f"ahp-session:/{nobody}", lambda u: {"session": u, "independent": True}),
        ("create_chat", session, f"ahp-session:/{nobody}", lambda u: {"session": u, "title": "t"}),
        ("list_sessions", session, f"ahp-session:/{nobody}", lambda u: {"session": u}),
    ]
    for name, theirs, none, arguments in tool_calls:
        got = same_answer(lambda u, name=name, arguments=arguments:
                          answer(client.post(f"/api/v1/tools/{name}", arguments(u), format="json")), theirs, none)
        assert got[0] in (200, 400, 404), (name, got)
        assert "globex" not in got[1], (name, got)


def test_rest_keeps_agent_definitions_and_config_to_the_tokens_tenant(acme, globex, transactional_db):
    theirs = AgentDefinition(tenant=globex.tenant)
    theirs.set_document({"name": "secret-agent", "provider": "echo"})
    theirs.save()
    client = rest(acme.tokens["root"])
    nobody = theirs.pk + 1000
    for method in ("get", "put"):
        got = same_answer(lambda i, method=method: answer(getattr(client, method)(f"/api/v1/agent-definitions/{i}", {},
                                                                   format="json")), str(theirs.pk), str(nobody))
        assert got[0] == 404
    assert "secret-agent" not in client.get("/api/v1/agent-definitions").content.decode()
    rest(globex.tokens["root"]).patch("/api/v1/config", {"advancedTools": True}, format="json")
    assert client.get("/api/v1/config").json()["advancedTools"] is False


def test_the_mcp_endpoint_answers_a_foreign_or_wrong_token_as_if_there_were_no_endpoint(two_tenants, acme, globex,
                                                                                       host):
    _, _, session, _ = two_tenants
    opened = rest(globex.tokens["member"]).get(f"/api/v1/sessions/{session.split('/')[-1]}/tools-endpoint")
    url = f"http://127.0.0.1:{host.port}/ahp-mcp/{session.split('/')[-1]}"
    assert opened.status_code == 200
    nobody = f"http://127.0.0.1:{host.port}/ahp-mcp/{uuid.uuid4()}"
    listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    for token in (acme.tokens["root"], acme.tokens["member"], opened.json()["token"] + "x"):
        def post(u, token=token):
            response = httpx.post(u, json=listing, headers={"Authorization": f"Bearer {token}",
                                                             "Accept": "application/json, text/event-stream"})
            return [response.status_code, response.text]

        assert same_answer(post, url, nobody)[0] == 404


def test_a_tool_called_through_my_mcp_endpoint_cannot_reach_another_tenants_session(two_tenants, acme, host):
    mine, _, session, _ = two_tenants
    own = mine.create_session()
    opened = rest(acme.tokens["root"]).get(f"/api/v1/sessions/{own.split('/')[-1]}/tools-endpoint").json()
    nobody = f"ahp-session:/{uuid.uuid4()}"

    def call(uri):
        response = httpx.post(opened["url"].replace("testserver", f"127.0.0.1:{host.port}"), json={
            "jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "get_session_context", "arguments": {"session": uri}}},
            headers={"Authorization": f"Bearer {opened['token']}", "Accept": "application/json, text/event-stream"})
        return response.json()["result"]

    got = same_answer(call, session, nobody)
    assert got["isError"] is True


def test_the_admin_answers_another_tenants_rows_as_rows_that_do_not_exist(acme, globex, transactional_db):
    from sessions_app.actions import do_create_session

    theirs = do_create_session(globex.principal("member"), uuid.uuid4())
    acme.admin.is_staff = True
    acme.admin.save()
    admin = Client()
    admin.force_login(acme.admin)
    nobody = uuid.uuid4()
    for path in ("/admin/sessions_app/session/{}/change/", "/admin/sessions_app/session/{}/delete/"):
        def page(i, path=path):
            response = admin.get(path.format(i), follow=True)
            return [response.status_code, response.redirect_chain and response.redirect_chain[-1][0],
                    [str(m) for m in response.context["messages"]] if response.context else None]

        same_answer(page, str(theirs.id), str(nobody))
    listing = admin.get("/admin/sessions_app/session/").content.decode()
    assert str(theirs.id) not in listing
    assert admin.get(f"/admin/sessions_app/session/?q={theirs.id}").context["cl"].result_count == 0
