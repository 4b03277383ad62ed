"""The host connects for a tenant only to public addresses, unless the operator allow-lists a
destination host-wide (AHP_OUTBOUND_ALLOW or the superuser admin), and never to its own
services; every redirect hop is checked again. Aimed at real local servers: http MCP servers
(the tenant's and a client's) and the Agent Merge adapter."""
import json

import pytest
from django.test import Client

from sandbox.models import OutboundAllow
from sandbox.outbound import OutboundRefused, check_destination
from tools_app.families.agent_merge.github import GitHub, GitHubError
from tools_app.models import SessionMcpServers

from ..ahp.mcp.helpers import wait_until
from ..ahp.protocol.harness import AhpClient, default_chat, set_config
from .servers import http_server, mcp_server


def loopback_refused(port, address="127.0.0.1"):
    return f"The host does not connect to {address}:{port}: it is a private address and not allow-listed."


def port_of(url):
    return int(url.rsplit(":", 1)[1].split("/")[0])


def refusal(host, port=80):
    with pytest.raises(OutboundRefused) as refused:
        check_destination(host, port)
    return refused.value.sentence


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1", "[::1]", "::ffff:127.0.0.1", "::127.0.0.1",
                                  "10.1.2.3", "172.16.0.1", "192.168.1.1", "100.64.0.1", "169.254.169.254",
                                  "fe80::1", "fc00::1", "224.0.0.1", "ff02::1", "0.0.0.0", "::", "240.0.0.1",
                                  "2002:7f00:1::1"])
def test_private_loopback_link_local_multicast_reserved_and_unspecified_are_refused(db, host):
    shown = f"[{host.strip('[]')}]" if ":" in host else host
    assert refusal(host) == f"The host does not connect to {shown}:80: it is a private address and not allow-listed."


def test_a_public_address_is_allowed(db):
    assert check_destination("8.8.8.8", 443) == ["8.8.8.8"]
    assert check_destination("::ffff:8.8.8.8", 443) == ["::ffff:808:808"]


def test_the_environment_allow_list_takes_cidrs_and_host_names(db, settings):
    settings.AHP_OUTBOUND_ALLOW = "127.0.0.1/32, 10.0.0.0/8,localhost,not a host"
    assert check_destination("127.0.0.1", 80) == ["127.0.0.1"]
    assert check_destination("::ffff:127.0.0.1", 80) == ["::ffff:7f00:1"]
    assert check_destination("10.9.9.9", 80) == ["10.9.9.9"]
    assert "127.0.0.1" in check_destination("localhost", 80)
    assert refusal("127.0.0.2") == loopback_refused(80, "127.0.0.2")
    assert refusal("192.168.1.1") == ("The host does not connect to 192.168.1.1:80: it is a private address and "
                                      "not allow-listed.")


def test_an_allow_list_entry_may_name_a_port_and_then_allows_that_port_alone(db, settings):
    settings.AHP_OUTBOUND_ALLOW = "127.0.0.1/32:8443, localhost:9443, [::1]:7443"
    assert check_destination("127.0.0.1", 8443) == ["127.0.0.1"]
    assert refusal("127.0.0.1", 8444) == loopback_refused(8444)
    assert "127.0.0.1" in check_destination("localhost", 9443)
    assert refusal("localhost", 443) == loopback_refused(443, "localhost")
    assert check_destination("::1", 7443) == ["::1"]
    assert refusal("::1", 80) == "The host does not connect to [::1]:80: it is a private address and not allow-listed."


def test_the_port_runhost_serves_on_is_refused_at_every_local_address_whatever_the_allow_list(
        db, settings, monkeypatch):
    settings.AHP_OUTBOUND_ALLOW = "127.0.0.0/8, localhost, 0.0.0.0/32:8123"
    monkeypatch.setenv("PORT", "8123")  # as runhost tells its children
    for host in ("127.0.0.1", "127.0.0.2", "localhost", "0.0.0.0"):
        assert refusal(host, 8123) == f"The host does not connect to {host}:8123: it is one of the host's own services."
    assert check_destination("127.0.0.1", 8124) == ["127.0.0.1"]


def test_a_superuser_allow_lists_in_the_admin_and_a_tenant_admin_cannot_see_it(
        acme, tenant_admin, django_user_model, django_capture_on_commit_callbacks):
    assert tenant_admin.get("/admin/sandbox/outboundallow/").status_code == 403
    assert tenant_admin.get("/admin/sandbox/outboundallow/add/").status_code == 403
    assert tenant_admin.post("/admin/sandbox/outboundallow/add/", {"entry": "127.0.0.1/32"}).status_code == 403
    assert "outboundallow" not in tenant_admin.get("/admin/").content.decode()
    assert refusal("127.0.0.1") == loopback_refused(80)

    operator = Client()
    operator.force_login(django_user_model.objects.create_superuser("operator", password="pw"))
    assert "127.0.0.1/32:8443, mcp.internal:443, [::1]:8443. Without a port it allows every port" in (
        operator.get("/admin/sandbox/outboundallow/add/").content.decode())
    bad = operator.post("/admin/sandbox/outboundallow/add/", {"entry": "not a host"})
    assert ("not a host is not a host name or a CIDR such as 127.0.0.1/32, with an optional port "
            "(127.0.0.1/32:8443).") in bad.content.decode()
    bad_port = operator.post("/admin/sandbox/outboundallow/add/", {"entry": "127.0.0.1/32:70000"})
    assert "127.0.0.1/32:70000: the port after the colon must be a number from 1 to 65535." in (
        bad_port.content.decode())
    with django_capture_on_commit_callbacks(execute=True):
        added = operator.post("/admin/sandbox/outboundallow/add/", {"entry": "127.0.0.1/32", "note": "tests"})
    assert added.status_code == 302
    assert check_destination("127.0.0.1", 80) == ["127.0.0.1"]
    allow = OutboundAllow.objects.get()
    assert tenant_admin.get(f"/admin/sandbox/outboundallow/{allow.pk}/change/").status_code == 403
    with django_capture_on_commit_callbacks(execute=True):
        operator.post(f"/admin/sandbox/outboundallow/{allow.pk}/delete/", {"post": "yes"})
    assert refusal("127.0.0.1") == loopback_refused(80)


def listed(uri, name):
    session_id = uri.split("/")[-1]
    return wait_until(lambda: (row := SessionMcpServers.objects.filter(session_id=session_id).first())
                      and name in row.server_tools and row.server_tools[name], describe=f"the host listing {name}")


def test_an_http_mcp_server_on_loopback_is_refused_until_allow_listed(acme, host, settings):
    with mcp_server() as (url, seen):
        set_config(host.port, acme.tokens["root"], mcpServers={"web": {"type": "http", "url": url}})
        with AhpClient(host.port, acme.tokens["member"]) as alice:
            refused = loopback_refused(port_of(url))
            assert listed(alice.create_session(), "web") == {"error": f"OutboundRefused: {refused}"}
            assert seen == []
            settings.AHP_OUTBOUND_ALLOW = "127.0.0.1/32"
            uri = alice.create_session()
            assert [t["name"] for t in listed(uri, "web")["tools"]] == ["whisper"]
            chat = default_chat(alice, uri)
            alice.subscribe(chat)
            settings.AHP_OUTBOUND_ALLOW = ""  # a call checks again: the operator withdrew it
            reply = alice.reply_to(alice.start_turn(chat, '/call web_whisper {"text": "QUIET"}'), timeout=30)
            assert refused in reply


def test_a_redirect_from_an_allowed_mcp_server_to_loopback_is_not_followed(acme, host, settings):
    settings.AHP_OUTBOUND_ALLOW = "127.0.0.1/32"
    with mcp_server("127.0.0.2") as (target, seen), http_server(redirect_to=target.removesuffix("/mcp")) as (front, _):
        set_config(host.port, acme.tokens["root"], mcpServers={"web": {"type": "http", "url": f"{front}/mcp"}})
        with AhpClient(host.port, acme.tokens["member"]) as alice:
            error = listed(alice.create_session(), "web")["error"]
    assert error.startswith(f"HTTPStatusError: Redirect to {target} not followed") and seen == []


def test_the_agent_merge_adapter_refuses_loopback_and_redirects_to_it(db, settings):
    with http_server(body=b"the job log") as (url, seen):
        with pytest.raises(GitHubError) as refused:
            GitHub("t0ken", base_url=url).job_log("o/r", 1)
        assert str(refused.value) == loopback_refused(port_of(url)) and seen == []
        settings.AHP_OUTBOUND_ALLOW = "127.0.0.1/32"
        assert GitHub("t0ken", base_url=url).job_log("o/r", 1) == "the job log"
        with http_server("127.0.0.2", body=b"internal") as (inner, inner_seen), \
                http_server(redirect_to=inner) as (front, _):
            with pytest.raises(GitHubError) as redirected:
                GitHub("t0ken", base_url=front).job_log("o/r", 1)
            assert str(redirected.value) == loopback_refused(port_of(inner), "127.0.0.2") and inner_seen == []


def test_a_name_is_connected_at_the_address_that_was_checked_and_keeps_its_host_header(db, settings):
    settings.AHP_OUTBOUND_ALLOW = "localhost"
    first = check_destination("localhost", 80)[0]
    if ":" in first:
        pytest.skip("localhost resolves to IPv6 first on this machine")
    with http_server(first, body=None) as (url, seen):
        port = url.rsplit(":", 1)[1]
        assert GitHub("t0ken", base_url=f"http://localhost:{port}").job_log("o/r", 1) == f"localhost:{port}"


def test_a_tenants_server_on_the_hosts_own_port_is_refused_whatever_the_allow_list_says(acme, host, settings):
    settings.AHP_OUTBOUND_ALLOW = "127.0.0.1/32"
    own = f"http://127.0.0.1:{host.port}/ahp-mcp/{'0' * 8}-0000-0000-0000-{'0' * 12}"
    set_config(host.port, acme.tokens["root"], mcpServers={"web": {"type": "http", "url": own}})
    with AhpClient(host.port, acme.tokens["member"]) as alice:
        assert listed(alice.create_session(), "web") == {"error": (
            f"OutboundRefused: The host does not connect to 127.0.0.1:{host.port}: it is one of the host's own "
            "services.")}


def declare_server(ide, uri, url):
    """As a member's client: announce a plugin, and answer the host's request for its .mcp.json
    with an http server at `url`."""
    ide.subscribe(uri)
    ide.dispatch(uri, {"type": "session/activeClientSet", "activeClient": {
        "clientId": "ide", "tools": [], "customizations": [{"type": "plugin", "uri": "file:///home/dev/plugin"}]}})
    ide.action("session/activeClientSet")
    frame = ide.host_request("resourceRead")
    manifest = json.dumps({"mcpServers": {"web": {"type": "http", "url": url}}})
    ide.send({"jsonrpc": "2.0", "id": frame["id"], "result": {"data": manifest, "encoding": "utf-8"}})


def test_a_server_a_client_declares_on_loopback_needs_an_allow_list_entry_naming_its_port(acme, host, settings):
    settings.AHP_OUTBOUND_ALLOW = "127.0.0.1/32"  # enough for the operator's own loopback servers
    with mcp_server() as (url, seen), AhpClient(host.port, acme.tokens["member"], "ide") as ide:
        uri = ide.create_session()
        declare_server(ide, uri, url)
        assert listed(uri, "web") == {"error": (
            f"OutboundRefused: The host does not connect to 127.0.0.1:{port_of(url)} for a client's server: a "
            "private address needs an allow-list entry with that port.")}
        assert seen == []
        settings.AHP_OUTBOUND_ALLOW = f"127.0.0.1/32:{port_of(url)}"
        uri = ide.create_session()
        declare_server(ide, uri, url)
        assert [t["name"] for t in listed(uri, "web")["tools"]] == ["whisper"]


def test_the_async_transport_refuses_what_the_rules_refuse_and_passes_what_they_allow(db, settings):
    import asyncio

    import httpx

    from sandbox.outbound import AsyncOutboundTransport

    async def get(url):
        async with httpx.AsyncClient(transport=AsyncOutboundTransport(), timeout=5) as http:
            return (await http.get(url)).status_code

    with http_server() as (url, seen):
        settings.AHP_OUTBOUND_ALLOW = ""
        with pytest.raises(OutboundRefused, match="it is a private address and not allow-listed"):
            asyncio.run(get(url))
        assert seen == []
        settings.AHP_OUTBOUND_ALLOW = "127.0.0.1/32"
        assert asyncio.run(get(url)) == 200
