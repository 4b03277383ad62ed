"""Credentials in mcpServers (env and headers values, URL userinfo and query values) never appear in logs, admin pages, REST answers, snapshots or the action
log a reconnect replays; env and headers values are encrypted in the database row."""
import asyncio
import logging
import uuid

import pytest
from django.test import Client
from rest_framework.test import APIClient

from sessions_app.models import ActionLog
from tools_app.families.mcp_servers.server_tools import list_session_servers
from tools_app.families.mcp_servers.servers import revealed
from tools_app.models import HostConfig, SessionMcpServers, StdioServer
from tools_app.sessions import do_start_session

from ..ahp.protocol.harness import AhpClient, default_chat

SECRETS = ("s3cret-env-value", "s3cret-header-value", "s3cret-url-password", "s3cret-url-query")
SERVERS = {
    "git": {"type": "stdio", "server": "git", "env": {"GIT_TOKEN": SECRETS[0]}},
    "web": {"type": "http", "url": f"http://ops:{SECRETS[2]}@127.0.0.1:9/mcp?token={SECRETS[3]}",
            "headers": {"Authorization": f"Bearer {SECRETS[1]}"}},
}


def assert_no_secret(text, where):
    for secret in SECRETS:
        assert secret not in text, f"{where} shows a credential"


@pytest.fixture
def configured(acme):
    StdioServer.objects.create(name="git", command="/nonexistent/ahp-test-mcp-server")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {acme.tokens['root']}")
    response = client.patch("/api/v1/config", {"mcpServers": SERVERS}, format="json")
    assert response.status_code == 200
    assert_no_secret(response.content.decode(), "the PATCH answer")
    assert revealed(HostConfig.for_tenant(acme.tenant).mcp_servers["git"])["env"]["GIT_TOKEN"] == SECRETS[0]  # kept
    return client


def test_the_database_rows_hold_no_plaintext_env_or_headers_value(acme, configured):
    session = do_start_session(acme.principal("member"), uuid.uuid4())
    rows = (HostConfig.objects.filter(tenant=acme.tenant).values_list("mcp_servers", flat=True).get(),
            SessionMcpServers.objects.filter(session=session).values_list("servers", flat=True).get())
    for row in rows:
        assert SECRETS[0] not in str(row) and SECRETS[1] not in str(row)
        assert revealed(row["web"])["headers"] == {"Authorization": f"Bearer {SECRETS[1]}"}


def test_values_sent_back_as_shown_are_kept_and_new_ones_replace_them(acme, configured):
    shown = configured.get("/api/v1/config").json()["mcpServers"]
    assert shown["web"]["url"] == "http://<set>@127.0.0.1:9/mcp?token=<set>"
    shown["git"]["env"]["NEW_TOKEN"] = "fresh"
    assert configured.put("/api/v1/config", {"mcpServers": shown}, format="json").status_code == 200
    stored = HostConfig.for_tenant(acme.tenant).mcp_servers
    assert revealed(stored["git"])["env"] == {"GIT_TOKEN": SECRETS[0], "NEW_TOKEN": "fresh"}
    assert stored["web"]["url"] == SERVERS["web"]["url"]
    changed = {**shown["web"], "url": "http://127.0.0.1:9/other"}
    configured.patch("/api/v1/config", {"mcpServers": {**shown, "web": changed}}, format="json")
    assert HostConfig.for_tenant(acme.tenant).mcp_servers["web"]["url"] == "http://127.0.0.1:9/other"


def test_rest_answers_mask_credentials(acme, configured):
    body = configured.get("/api/v1/config")
    assert_no_secret(body.content.decode(), "GET /api/v1/config")
    assert body.json()["mcpServers"]["git"]["env"] == {"GIT_TOKEN": "<set>"}
    put = configured.put("/api/v1/config", {"mcpServers": body.json()["mcpServers"]}, format="json")
    assert_no_secret(put.content.decode(), "the PUT answer")
    assert revealed(HostConfig.for_tenant(acme.tenant).mcp_servers["web"])["headers"]["Authorization"].endswith(SECRETS[1])


def test_snapshots_actions_and_the_replayed_log_mask_credentials(acme, host, configured):
    with AhpClient(host.port, acme.tokens["root"], "ide") as client:
        root = client.call("subscribe", {"channel": "ahp-root://"})
        assert_no_secret(str(root), "the root snapshot")
        client.dispatch("ahp-root://", {"type": "root/configChanged", "config": {"advancedTools": True}})
        assert_no_secret(str(client.action("root/configChanged")), "root/configChanged")
        session = client.create_session()
        assert_no_secret(str(client.call("subscribe", {"channel": session})), "the session snapshot")
        assert_no_secret(str(client.subscribe(default_chat(client, session))), "the chat snapshot")
        replay = client.call("reconnect", {"clientId": "ide", "lastSeenServerSeq": 0, "subscriptions": ["ahp-root://"]})
        assert_no_secret(str(replay), "the reconnect replay")
    assert_no_secret(str(list(ActionLog.objects.values_list("envelope", flat=True))), "the action log")


def test_logs_and_recorded_listing_errors_never_show_credentials(acme, configured, caplog, transactional_db):
    session = do_start_session(acme.principal("member"), uuid.uuid4())
    with caplog.at_level(logging.DEBUG):
        listed = asyncio.run(list_session_servers(session.id))
    assert set(listed) == {"git", "web"} and all("error" in v for v in listed.values())
    assert_no_secret(caplog.text, "the log")
    assert_no_secret(str(SessionMcpServers.objects.get(session=session).server_tools), "the recorded errors")


def test_admin_pages_mask_credentials(acme, configured, transactional_db):
    session = do_start_session(acme.principal("member"), uuid.uuid4())
    acme.admin.is_staff = True
    acme.admin.save()
    admin = Client()
    admin.force_login(acme.admin)
    pages = [
        f"/admin/tools_app/hostconfig/{HostConfig.for_tenant(acme.tenant).pk}/change/",
        "/admin/tools_app/hostconfig/",
        f"/admin/tools_app/sessionmcpservers/{session.pk}/change/",
        "/admin/tools_app/sessionmcpservers/",
        f"/admin/sessions_app/session/{session.pk}/change/",
        f"/console/{acme.tenant.slug}/dashboard",
    ]
    for page in pages:
        response = admin.get(page)
        assert response.status_code == 200, page
        assert_no_secret(response.content.decode(), page)


def test_a_server_refusing_the_credentials_is_recorded_without_them(acme, settings, transactional_db):
    from ..sandbox.servers import http_server

    settings.AHP_OUTBOUND_ALLOW = "127.0.0.1/32"
    with http_server(status=401, body=b"no") as (url, seen):
        servers = {"web": {"type": "http", "url": f"{url.replace('//', f'//ops:{SECRETS[2]}@')}/mcp?token={SECRETS[3]}",
                           "headers": {"Authorization": f"Bearer {SECRETS[1]}"}}}
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {acme.tokens['root']}")
        assert client.patch("/api/v1/config", {"mcpServers": servers}, format="json").status_code == 200
        session = do_start_session(acme.principal("member"), uuid.uuid4())
        listed = asyncio.run(list_session_servers(session.id))
    assert seen and "401" in listed["web"]["error"], listed
    assert_no_secret(str(listed), "the recorded error")


def test_a_url_that_does_not_parse_is_shown_masked_not_as_an_error(acme, configured):
    broken = {"web": {"type": "http", "url": f"http://[{SECRETS[2]}/mcp"}}
    refused = configured.patch("/api/v1/config", {"mcpServers": broken}, format="json")
    assert (refused.status_code, refused.json()) == (400, {"error": "mcpServers.web.url must be an http or https URL."})
    # One kept in a row from before every door refused it.
    HostConfig.objects.filter(tenant=acme.tenant).update(mcp_servers=broken)
    shown = configured.get("/api/v1/config")
    assert shown.status_code == 200 and shown.json()["mcpServers"]["web"]["url"] == "<set>"
