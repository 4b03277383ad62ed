"""Configured MCP servers (a tenant's mcpServers): shapes, capture at start, masking, client
plugins over the tenant, and the host listing each server's tools through the `mcp` client."""
import json
import logging
import time
from pathlib import Path

from sessions_app.models import Session
from tools_app.families.mcp_servers.pool import POOL
from tools_app.families.mcp_servers.server_tools import effective_servers
from tools_app.families.mcp_servers.servers import revealed, usable_servers
from tools_app.models import HostConfig, SessionMcpServers, StdioServer

from ....ahp.mcp.helpers import tools_endpoint, wait_until, with_mcp
from ....ahp.protocol.harness import AhpClient, default_chat, set_config
from ....conftest import free_port


def session_row(uri):
    return SessionMcpServers.objects.get(session_id=uri.split("/")[-1])


def listed(uri, *names):
    return wait_until(lambda: (row := session_row(uri)) and all(n in row.server_tools for n in names) and row,
                      describe=f"the host listing {names}")


def test_it_leaves_out_each_bad_entry_with_one_warning_and_keeps_the_rest(caplog, db):
    StdioServer.objects.create(name="srv", command="/usr/bin/srv")
    servers = {
        "good": {"type": "stdio", "server": "srv"},
        "typeless": {"command": "srv", "env": {"TOKEN": "hunter2"}},
        "no-server": {"type": "stdio", "env": {"TOKEN": "hunter2"}},
        "no-url": {"type": "http", "headers": {"Authorization": "hunter2"}},
        "bad-url": {"type": "http", "url": "ftp://x"},
        "not-an-object": "srv",
        "web": {"type": "http", "url": "https://mcp.example/", "headers": {"Authorization": "hunter2"}},
    }
    with caplog.at_level(logging.WARNING, logger="tools_app.families.mcp_servers.servers"):
        usable = usable_servers(servers)
    assert list(usable) == ["good", "web"]
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 5
    assert ("Left out MCP server 'no-server' of mcpServers: a stdio entry needs \"server\": the name of one of "
            "the operator's stdio servers.") in warnings
    assert all("hunter2" not in w for w in warnings)
    assert usable_servers({}) is None and usable_servers(None) is None
    assert usable_servers({"only-bad": {"type": "ftp"}}) is None


def test_the_map_is_read_at_start_and_a_running_session_keeps_it(acme, host, tiny_server):
    with AhpClient(host.port, acme.tokens["member"]) as alice:
        none_yet = alice.create_session()
        assert session_row(none_yet).servers is None  # absent, not empty
        set_config(host.port, acme.tokens["root"], mcpServers={"tiny": tiny_server})
        # An entry every door now refuses, kept in a row from before: a session leaves it out.
        HostConfig.objects.filter(tenant=acme.tenant).update(mcp_servers={"tiny": tiny_server, "broken": {"type": "http"}})
        first = alice.create_session()
        assert session_row(first).servers == {"tiny": tiny_server}
        other = {**tiny_server, "env": {"SUFFIX": "!"}}
        set_config(host.port, acme.tokens["root"], mcpServers={"tiny2": other})
        second = alice.create_session()
        assert session_row(first).servers == {"tiny": tiny_server}
        assert {n: revealed(e) for n, e in session_row(second).servers.items()} == {"tiny2": other}
        assert session_row(none_yet).servers is None
        listed(first, "tiny")
        listed(second, "tiny2")


def test_credentials_read_set_wherever_configuration_is_shown(acme, host, client, tiny_server):
    secret = {**tiny_server, "env": {"SUFFIX": "hunter2"}}
    web = {"type": "http", "url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": "Bearer hunter2"}}
    shown = set_config(host.port, acme.tokens["root"], mcpServers={"tiny": secret, "web": web})
    assert shown["mcpServers"]["tiny"]["env"] == {"SUFFIX": "<set>"}
    assert shown["mcpServers"]["web"]["headers"] == {"Authorization": "<set>"}
    with AhpClient(host.port, acme.tokens["root"]) as operator:
        state = operator.subscribe("ahp-root://")
        assert "hunter2" not in json.dumps(state)
        uri = operator.create_session()
    listed(uri, "tiny", "web")
    from django.contrib.auth import get_user_model

    admin = get_user_model().objects.create_superuser("boss", password="pw")
    client.force_login(admin)
    page = client.get(f"/admin/tools_app/sessionmcpservers/{uri.split('/')[-1]}/change/")
    assert page.status_code == 200
    text = page.content.decode()
    assert "&lt;set&gt;" in text and "hunter2" not in text
    assert "shout" in text and "could not be listed" in text


def test_the_host_lists_a_stdio_server_and_offers_its_tools_in_process_and_on_the_endpoint(acme, host, tiny_server):
    set_config(host.port, acme.tokens["root"], mcpServers={"tiny": {**tiny_server, "env": {"SUFFIX": "!"}}})
    with AhpClient(host.port, acme.tokens["member"]) as alice:
        uri = alice.create_session()
        row = listed(uri, "tiny")
        assert [t["name"] for t in row.server_tools["tiny"]["tools"]] == ["shout"]
        chat = default_chat(alice, uri)
        alice.subscribe(chat)
        assert "tiny_shout" in alice.reply_to(alice.start_turn(chat, "/tools")).split("\n")
        assert alice.reply_to(alice.start_turn(chat, '/call tiny_shout {"text": "hi"}'), timeout=40) == "HI!"
        endpoint = tools_endpoint(host.port, acme.tokens["member"], uri).json()
        tools = with_mcp(endpoint["url"], endpoint["token"], lambda s: s.list_tools()).tools
        shout = next(t for t in tools if t.name == "tiny_shout")
        assert shout.description == "Upper-case the text." and shout.inputSchema["required"] == ["text"]


def test_another_tenant_never_sees_a_tenants_server_tools(acme, globex, host, tiny_server):
    set_config(host.port, acme.tokens["root"], mcpServers={"tiny": tiny_server})
    with AhpClient(host.port, acme.tokens["member"]) as alice, AhpClient(host.port, globex.tokens["member"]) as gus:
        listed(alice.create_session(), "tiny")
        chat = default_chat(gus, gus.create_session())
        gus.subscribe(chat)
        assert "tiny_shout" not in gus.reply_to(gus.start_turn(chat, "/tools")).split("\n")


def test_the_host_lists_an_http_server(acme, host, tiny_http_server):
    set_config(host.port, acme.tokens["root"], mcpServers={"web": tiny_http_server})
    with AhpClient(host.port, acme.tokens["member"]) as alice:
        uri = alice.create_session()
        row = listed(uri, "web")
        assert [t["name"] for t in row.server_tools["web"]["tools"]] == ["whisper"]
        chat = default_chat(alice, uri)
        alice.subscribe(chat)
        assert alice.reply_to(alice.start_turn(chat, '/call web_whisper {"text": "QUIET"}'), timeout=30) == "quiet"


def test_an_unreachable_server_is_a_gap_never_a_failed_session(acme, host, tiny_server):
    StdioServer.objects.create(name="gone", command="/nonexistent/mcp-server")
    set_config(host.port, acme.tokens["root"], mcpServers={
        "tiny": tiny_server,
        "gone": {"type": "stdio", "server": "gone"},
        "down": {"type": "http", "url": f"http://127.0.0.1:{free_port()}/mcp"},
    })
    with AhpClient(host.port, acme.tokens["member"]) as alice:
        uri = alice.create_session()
        row = listed(uri, "tiny", "gone", "down")
        assert "tools" in row.server_tools["tiny"]
        assert "error" in row.server_tools["gone"] and "error" in row.server_tools["down"]
        assert Session.objects.get(id=uri.split("/")[-1]).status == Session.IDLE
        chat = default_chat(alice, uri)
        alice.subscribe(chat)
        turn = alice.start_turn(chat, "hello")
        assert alice.reply_to(turn) == "hello"
        # Each turn tells the chat which servers it runs without.
        told = [f["params"]["action"]["part"]["content"] for f in alice.notifications
                if f["params"].get("action", {}).get("type") == "chat/responsePart"
                and f["params"]["action"]["turnId"] == turn]
        assert sorted(told) == [
            f'MCP server "{name}" is unavailable: listing its tools failed, so this turn runs without them.'
            for name in ("down", "gone")]


def answer_manifest(ide, manifests):
    """Answer the host's resourceRead for a plugin's .mcp.json as a client would: from its own disk."""
    frame = ide.host_request("resourceRead")
    uri = frame["params"]["uri"]
    ide.send({"jsonrpc": "2.0", "id": frame["id"], "result": {"data": manifests[uri], "encoding": "utf-8"}})
    return uri


def test_a_client_plugin_http_server_is_merged_over_the_tenants_and_wins_a_clash(
        acme, host, tiny_server, tiny_http_server, settings):
    # A client's server on a private address needs an allow-list entry naming its port.
    settings.AHP_OUTBOUND_ALLOW = f"127.0.0.1/32:{tiny_http_server['url'].rsplit(':', 1)[1].split('/')[0]}"
    set_config(host.port, acme.tokens["root"], mcpServers={"web": {"type": "http", "url": "http://127.0.0.1:9/mcp"},
                                                             "kept": tiny_server})
    manifest = json.dumps({"mcpServers": {"web": {"url": tiny_http_server["url"]},
                                          "local": {"command": "/bin/sh", "args": ["-c", "id"]}}})
    with AhpClient(host.port, acme.tokens["member"], "ide") as ide:
        uri = ide.create_session()
        listed(uri, "kept")
        ide.subscribe(uri)
        ide.dispatch(uri, {"type": "session/activeClientSet", "activeClient": {
            "clientId": "ide", "tools": [],
            "customizations": [{"type": "plugin", "id": "p1", "uri": "file:///home/dev/plugins/mine", "name": "mine"}]}})
        ide.action("session/activeClientSet")
        asked = answer_manifest(ide, {"file:///home/dev/plugins/mine/.mcp.json": manifest})
        assert asked == "file:///home/dev/plugins/mine/.mcp.json"
        session = Session.objects.get(id=uri.split("/")[-1])
        servers = wait_until(lambda: (found := effective_servers(session)) and found["web"] != {
            "type": "http", "url": "http://127.0.0.1:9/mcp"} and found, describe="the plugin's servers")
        # The client's http server wins the clash (marked as a client's); its stdio server is never the
        # host's to run.
        assert servers == {"web": {"type": "http", "url": tiny_http_server["url"], "clientDeclared": True},
                           "kept": tiny_server}
        chat = default_chat(ide, uri)
        ide.subscribe(chat)
        deadline = time.monotonic() + 40
        while True:  # the client's server replaces the tenant's once the host has listed it
            reply = ide.reply_to(ide.start_turn(chat, '/call web_whisper {"text": "HI"}'), timeout=40)
            if reply == "hi" or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert reply == "hi"


def test_a_client_plugin_folder_is_never_read_from_the_hosts_disk(acme, host, tmp_path):
    plugin = tmp_path / "plugin"
    plugin.mkdir()
    (plugin / ".mcp.json").write_text(json.dumps({"mcpServers": {"web": {"url": "http://127.0.0.1:9/mcp"}}}))
    with AhpClient(host.port, acme.tokens["member"], "ide") as ide:
        uri = ide.create_session()
        ide.subscribe(uri)
        ide.dispatch(uri, {"type": "session/activeClientSet", "activeClient": {
            "clientId": "ide", "tools": [], "customizations": [{"type": "plugin", "uri": plugin.as_uri()}]}})
        ide.action("session/activeClientSet")
        frame = ide.host_request("resourceRead")
        ide.send({"jsonrpc": "2.0", "id": frame["id"], "error": {"code": -32008, "message": "No such file"}})
        row = wait_until(lambda: (r := session_row(uri)) and "ide" in r.client_servers and r,
                         describe="the host recording what the client answered")
        assert row.client_servers == {"ide": {}}
        assert effective_servers(Session.objects.get(id=uri.split("/")[-1])) is None


def tiny_server_processes(script_dir):
    """The pids of running tiny servers started from `script_dir` (their command line names it)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and str(script_dir) in (proc / "cmdline").read_bytes().decode(errors="replace"):
                found.append(int(proc.name))
        except OSError:
            continue
    return found


def call_tiny_once(acme, host, tiny_server):
    set_config(host.port, acme.tokens["root"], mcpServers={"tiny": tiny_server})
    alice = AhpClient(host.port, acme.tokens["member"])
    uri = alice.create_session()
    listed(uri, "tiny")
    chat = default_chat(alice, uri)
    alice.subscribe(chat)
    assert alice.reply_to(alice.start_turn(chat, '/call tiny_shout {"text": "hi"}'), timeout=40) == "HI"
    return alice, uri


def test_a_pooled_stdio_server_left_unused_past_the_idle_timeout_is_closed(acme, host, tiny_server, tmp_path,
                                                                           settings):
    alice, uri = call_tiny_once(acme, host, tiny_server)
    with alice:
        assert tiny_server_processes(tmp_path)  # kept running between calls
        settings.AHP_MCP_IDLE_SECONDS = 300
        POOL.reap_now()
        assert tiny_server_processes(tmp_path)  # not idle long enough
        settings.AHP_MCP_IDLE_SECONDS = 1
        time.sleep(1.1)  # the idle time itself is what is tested
        POOL.reap_now()
        wait_until(lambda: not tiny_server_processes(tmp_path), describe="the idle stdio server ending")
        chat = default_chat(alice, uri)
        assert alice.reply_to(alice.start_turn(chat, '/call tiny_shout {"text": "again"}'), timeout=40) == "AGAIN"


def test_a_stdio_server_of_a_session_disposed_elsewhere_is_closed(acme, host, tiny_server, tmp_path):
    alice, uri = call_tiny_once(acme, host, tiny_server)
    with alice:
        assert tiny_server_processes(tmp_path)
        Session.objects.filter(id=uri.split("/")[-1]).delete()  # as another process disposing it would
        POOL.reap_now()
        wait_until(lambda: not tiny_server_processes(tmp_path), describe="the orphaned stdio server ending")
