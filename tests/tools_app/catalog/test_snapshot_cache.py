"""A chat's catalog snapshot and its tenant's HostConfig are kept between model requests and never
outlive the rows they were made from: each write that changes an input (a configuration or
plugin setting, an agent definition, a client's announcement or departure, an MCP server
listing) is seen by the very next request, in this process and in another one; and one tenant
is never handed another's."""
import uuid

import pytest

from sessions_app import actions
from sessions_app.models import ActiveClient, Chat
from tools_app.actions import do_change_host_config, do_save_agent_definition
from tools_app.catalog.loader import catalog_for_chat
from tools_app.catalog.validation import ToolRefusal
from tools_app.families.mcp_servers.actions import do_capture_mcp_servers, do_record_server_tools
from tools_app.models import HostConfig
from tools_app.runtime.toolbox import ChatToolbox

from ...ahp.protocol.harness import AhpClient, default_chat
from ...conftest import production_server
from ..families.session.conftest import Place

PING = {"name": "ping", "inputSchema": {"type": "object", "properties": {}}}
PONG = {"name": "pong", "inputSchema": {"type": "object", "properties": {}}}
LOOKUP = {"name": "lookup", "description": "Look a word up.", "inputSchema": {"type": "object"}}


def say(text_type):
    return {"name": "say", "inputSchema": {"type": "object", "properties": {"text": {"type": text_type}},
                                           "required": ["text"]}}


@pytest.fixture
def place(acme):
    place = Place(acme)
    actions.do_set_active_client(place.principal, place.session, "ide", {"clientId": "ide", "tools": [PING]})
    catalog_for_chat(place.chat)  # kept from here on
    return place


def names(place):
    return catalog_for_chat(place.chat).names


def test_it_offers_a_configuration_change_at_the_next_request(place, acme):
    assert "list_sessions" in names(place)
    do_change_host_config(acme.principal("admin"), {"sessionTools": False})
    assert "list_sessions" not in names(place)


def test_it_offers_a_plugin_setting_change_at_the_next_request(place, acme):
    do_change_host_config(acme.principal("admin"), {"plugins": {"echo": {"hostTools": False}}})
    assert [name for name in names(place) if not name.startswith("ide__")] == []
    do_change_host_config(acme.principal("admin"), {"plugins": {"echo": {"hostTools": True}}})
    assert "list_sessions" in names(place)


def test_it_offers_a_configuration_written_in_bulk_at_the_next_request(place, acme):
    HostConfig.for_tenant(acme.tenant)
    HostConfig.objects.filter(tenant=acme.tenant).update(session_tools=False)
    assert "list_sessions" not in names(place)


def test_a_client_call_begun_after_a_timeout_change_gets_the_new_deadline(place, acme, globex):
    do_change_host_config(globex.principal("admin"), {"clientToolTimeoutMs": 0})
    toolbox = ChatToolbox(place.turn)

    def begin_ping():
        _, call, _ = toolbox.begin_call(None, "ide__ping", {}, uuid.uuid4())
        return call

    for _ in range(2):  # read, then kept; the other tenant's setting is its own
        call = begin_ping()
        assert (call.deadline - call.created).total_seconds() == 600
    do_change_host_config(acme.principal("admin"), {"clientToolTimeoutMs": 0})
    assert begin_ping().deadline is None
    HostConfig.objects.filter(tenant=acme.tenant).update(client_tool_timeout_ms=5000)
    call = begin_ping()
    assert (call.deadline - call.created).total_seconds() == 5


def test_it_offers_a_clients_new_announcement_and_drops_a_departed_clients_tools(place):
    actions.do_set_active_client(place.principal, place.session, "ide", {"clientId": "ide", "tools": [PING, PONG]})
    assert {"ide__ping", "ide__pong"} <= set(names(place))
    actions.do_release_client(ActiveClient.objects.get(session=place.session, client_id="ide").pk)
    assert [name for name in names(place) if name.startswith("ide__")] == []


def test_it_offers_what_an_mcp_server_listing_recorded_at_the_next_request(place):
    do_capture_mcp_servers(place.session)
    assert "words_lookup" not in names(place)
    do_record_server_tools(place.session.pk, {"words": {"tools": [LOOKUP]}})
    assert "words_lookup" in names(place)
    do_record_server_tools(place.session.pk, {"words": {"error": "ConnectError: refused"}})
    assert "words_lookup" not in names(place)


def test_it_follows_the_agent_definition_its_session_names_as_it_is_made_and_changed(place, acme):
    place.chat.session.config = {"agentDefinition": "narrow"}
    assert "rename_chat" in names(place)  # no such definition yet: nothing is narrowed
    definition = do_save_agent_definition(acme.tenant, {"name": "narrow", "provider": "echo",
                                                        "tools": [{"kind": "list_sessions"}]},
                                          acting=acme.principal("admin"))
    assert names(place) == ["list_sessions"]
    do_save_agent_definition(acme.tenant, {"name": "narrow", "provider": "echo", "tools": [{"kind": "rename_chat"}]},
                             acting=acme.principal("admin"), definition=definition)
    assert names(place) == ["rename_chat"]


def test_it_checks_input_against_the_schema_a_client_announced_last(place):
    actions.do_set_active_client(place.principal, place.session, "ide", {"clientId": "ide", "tools": [say("string")]})
    with pytest.raises(ToolRefusal) as refused:
        catalog_for_chat(place.chat).check_input("ide__say", {"text": 1})
    assert refused.value.sentence == "Invalid input for ide__say at /text: 1 is not of type 'string'"
    actions.do_set_active_client(place.principal, place.session, "ide", {"clientId": "ide", "tools": [say("integer")]})
    assert catalog_for_chat(place.chat).check_input("ide__say", {"text": 1}).name == "ide__say"
    with pytest.raises(ToolRefusal) as refused:
        catalog_for_chat(place.chat).check_input("ide__say", {"text": "one"})
    assert refused.value.sentence == "Invalid input for ide__say at /text: 'one' is not of type 'integer'"


def test_another_tenant_is_never_handed_a_kept_snapshot(place, globex):
    do_change_host_config(globex.principal("admin"), {"sessionTools": False})
    other = Place(globex)
    for _ in range(2):  # made, then kept
        assert "list_sessions" in names(place) and "ide__ping" in names(place)
        assert "list_sessions" not in names(other) and "ide__ping" not in names(other)


def change_config(acme, session_id):
    do_change_host_config(acme.principal("admin"), {"sessionTools": False})
    return lambda offered: "list_sessions" not in offered


def announce_client(acme, session_id):
    session = Chat.objects.get(session_id=session_id, is_default=True).session
    actions.do_set_active_client(acme.principal("member"), session, "ide", {"clientId": "ide", "tools": [PONG]})
    return lambda offered: "ide__pong" in offered


def record_listing(acme, session_id):
    do_record_server_tools(session_id, {"words": {"tools": [LOOKUP]}})
    return lambda offered: "words_lookup" in offered


@pytest.mark.e2e  # a real server process keeps the snapshot; this process writes
@pytest.mark.parametrize("write", [change_config, announce_client, record_listing])
def test_a_write_in_another_process_reaches_the_next_request_of_a_process_keeping_the_snapshot(
        acme, transactional_db, write):
    with production_server() as port, AhpClient(port, acme.tokens["member"], "alice") as alice:
        session = alice.create_session()
        chat = default_chat(alice, session)
        alice.subscribe(chat)
        for _ in range(2):  # made, then kept
            before = alice.reply_to(alice.start_turn(chat, "/tools")).split("\n")
        seen = write(acme, uuid.UUID(session.split("/")[-1]))
        assert not seen(before)
        assert seen(alice.reply_to(alice.start_turn(chat, "/tools")).split("\n"))
