"""The reads that run on every listing, snapshot and model request take a fixed number of
queries, however many sessions a tenant has and however many chats a session has: each is
counted at a small and at a larger size and the two counts must be equal."""
import uuid
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from ahp.protocol.methods import session_page
from sessions_app import actions, events, state
from sessions_app.channels import chat_at
from sessions_app.events.numbering import take_seqs
from sessions_app.models import ActiveClient, Chat, ChatBackend, ClientConnection, Session, ToolCall, Turn
from tools_app.catalog.loader import catalog_for_chat
from tools_app.queries import turn_to_run
from tools_app.runtime.toolbox import ChatToolbox, complete_host_call

from ..tools_app.families.session.conftest import Place

PING = {"name": "ping", "inputSchema": {"type": "object", "properties": {}}}


def add_sessions(people, count):
    """`count` more sessions, each with its default chat, a side chat (so list rows carry chats)
    running a turn, and a chat on another agent."""
    sessions = Session.objects.bulk_create(
        Session(tenant=people.tenant, owner=people.member, title=f"bulk {i}") for i in range(count))
    chats = Chat.objects.bulk_create(
        [Chat(session=s, is_default=True) for s in sessions] + [Chat(session=s, title="side") for s in sessions])
    Turn.objects.bulk_create(Turn(chat=c, text="busy") for c in chats[count:])
    ChatBackend.objects.bulk_create(ChatBackend(chat=c, provider="other") for c in chats[count:])


def add_chats(place, count):
    for _ in range(count):
        chat = actions.do_create_chat(place.principal, place.session, uuid.uuid4(), "side")
        actions.do_start_turn(place.principal, chat, uuid.uuid4(), "busy")


def queries(read):
    with CaptureQueriesContext(connection) as captured:
        read()
    return len(captured)


def counted_at_two_sizes(read, grow):
    read()  # objects the read caches on first use (a chat's session, its tenant) are loaded once
    small = queries(read)
    grow()
    return small, queries(read)


@pytest.fixture
def place(acme):
    place = Place(acme)
    actions.do_set_active_client(place.principal, place.session, "ide", {"clientId": "ide", "tools": [PING]})
    return place


def test_it_lists_sessions_with_the_tool_in_queries_that_do_not_grow_with_sessions_or_chats(place, acme):
    add_sessions(acme, 3)
    small, large = counted_at_two_sizes(lambda: place.call("list_sessions"), lambda: add_sessions(acme, 40))
    assert len(place.call("list_sessions")["sessions"]) == 44
    # The catalog check (one query while its snapshot is kept) and the person's role are in the
    # count: tool calls go through both.
    assert small == large <= 7


def test_it_lists_at_most_the_hundred_newest_sessions_and_says_so(place, acme):
    add_sessions(acme, 100)
    answer = place.call("list_sessions")
    assert len(answer["sessions"]) == 100 and place.session.uri not in {r["session"] for r in answer["sessions"]}
    assert answer["truncated"] == ("Only the 100 most recently modified matching sessions are listed; "
                                   "narrow the list with the filters to see others.")
    assert [r["session"] for r in place.call("list_sessions", workspace="/nowhere")["sessions"]] == []


def test_it_lists_one_session_with_the_tool_in_queries_that_do_not_grow_with_its_chats(place):
    add_chats(place, 2)
    small, large = counted_at_two_sizes(lambda: place.call("list_sessions", session=place.session.uri),
                                        lambda: add_chats(place, 15))
    assert small == large <= 8


def test_it_answers_get_current_session_in_queries_that_do_not_grow_with_its_chats(place):
    add_chats(place, 2)
    small, large = counted_at_two_sizes(lambda: place.call("get_current_session"), lambda: add_chats(place, 15))
    assert len(place.call("get_current_session")["chats"]) == 18
    assert small == large <= 7


def test_it_answers_the_socket_listSessions_in_queries_that_do_not_grow_with_sessions(place, acme):
    member = acme.principal("member")
    add_sessions(acme, 3)
    small, large = counted_at_two_sizes(lambda: session_page(member, 50, None), lambda: add_sessions(acme, 60))
    page = session_page(member, 50, None)
    assert len(page["items"]) == 50 and page["nextCursor"]
    assert small == large <= 2
    assert queries(lambda: session_page(member, 50, page["nextCursor"])) == large


def test_listings_leave_each_sessions_published_tools_config_and_meta_unread(place, acme):
    # A session's published tools are the host's definitions with their schemas: decoding them
    # for each listed row was a tenth of a serving process's time under load (bench.load).
    add_sessions(acme, 3)
    with CaptureQueriesContext(connection) as captured:
        session_page(acme.principal("member"), 50, None)
        place.call("list_sessions")
        place.call("get_current_session")
    read = [q["sql"] for q in captured if '"sessions_app_session"."server_tools"' in q["sql"]
            or '"sessions_app_session"."meta"' in q["sql"] or '"sessions_app_session"."config"' in q["sql"]]
    assert read == []


def test_it_reads_a_session_snapshot_in_queries_that_do_not_grow_with_its_chats(place):
    add_chats(place, 2)
    small, large = counted_at_two_sizes(lambda: state.session_state(place.session, {}), lambda: add_chats(place, 15))
    assert len(state.session_state(place.session, {})["chats"]) == 18
    assert small == large <= 5


def test_it_reads_a_chat_snapshot_in_queries_that_do_not_grow_with_its_turns(place):
    def more_turns(count):
        for _ in range(count):
            actions.do_end_turn(place.turn.id, response_text="ok")
            place.turn = actions.do_start_turn(place.principal, place.chat, uuid.uuid4(), "again")

    more_turns(2)
    small, large = counted_at_two_sizes(lambda: state.chat_state(place.chat), lambda: more_turns(15))
    assert small == large <= 6  # 6: the chat's own folder (its backend row), which its snapshot shows


def test_it_loads_a_chats_catalog_in_queries_that_do_not_grow_with_sessions_or_chats(place, acme):
    chat = Chat.objects.get(pk=place.chat.pk)
    small, large = counted_at_two_sizes(lambda: catalog_for_chat(chat),
                                        lambda: (add_sessions(acme, 40), add_chats(place, 10)))
    assert "ide__ping" in catalog_for_chat(chat).names
    assert small == large <= 1  # the stamp of the rows it was made from, while its snapshot is kept


def test_a_turns_work_leaves_its_sessions_published_tools_unread(place):
    """Run, a host call begun and completed, a client's action found, the turn ended: none of it
    decodes the session's published tools (the host's definitions with their schemas)."""
    binding = catalog_for_chat(place.chat).check_input("get_current_session", {})
    result = {"success": True, "pastTenseMessage": "read", "content": []}
    with CaptureQueriesContext(connection) as captured:
        turn, _ = turn_to_run(place.turn.pk)
        call, _ = ChatToolbox(turn).begin_host_call(binding, {})
        complete_host_call(call.id, result, turn)
        chat_at(place.chat.uri, place.session.tenant)
        actions.do_end_turn(turn.pk, response_text="done")
    assert Turn.objects.get(pk=turn.pk).state == "complete" and ToolCall.objects.get(pk=call.pk).result == result
    assert [q["sql"] for q in captured if "server_tools" in q["sql"]] == []


def test_a_turns_end_tells_its_runner_whether_effects_or_a_queued_message_follow(place):
    """Read in the ending's own transaction: a turn with neither (most turns) costs its runner no
    further transaction, no effects' read and no look for a queued message."""
    ended = []
    statements_of_end = queries(lambda: ended.append(actions.do_end_turn(place.turn.pk, response_text="done")))
    assert ended == [(False, False)] and Turn.objects.get(pk=place.turn.pk).state == "complete"
    # Its actions numbered and logged together (one UPDATE, one INSERT); the session's chats read
    # once for the catalogue its status change publishes (root/sessionSummaryChanged).
    assert statements_of_end <= 11
    turn = actions.do_start_turn(place.principal, place.chat, uuid.uuid4(), "next")
    actions.do_add_turn_effect(place.principal, turn, "set_workspace", {"folder": "/nowhere"})
    assert actions.do_send_message(place.principal, place.chat, "after it")[0] is None  # queued
    assert actions.do_end_turn(turn.pk, error="failed") == (True, True)
    assert actions.do_end_turn(turn.pk, response_text="late") is None  # ended already: not known here


def test_a_client_tool_call_begins_and_completes_in_a_handful_of_statements(place):
    """Each is one transaction: no read of the turn, chat or session the caller holds, no
    savepoint, the turn's state checked by the write that appends the call."""
    turn = Turn.objects.select_related("chat__session__tenant", "sender").get(pk=place.turn.pk)  # as run_turn has it
    toolbox, call_id = ChatToolbox(turn), uuid.uuid4()
    catalog_for_chat(turn.chat)  # the snapshot made once: the begin reads only its stamp
    with CaptureQueriesContext(connection) as begun:
        toolbox.begin_call(None, "ide__ping", {}, call_id)
    chat = chat_at(place.chat.uri, place.session.tenant)  # as the consumer finds the action's target
    result = {"success": True, "pastTenseMessage": "pinged", "content": [{"type": "text", "text": "pong"}]}
    with CaptureQueriesContext(connection) as completed:
        actions.do_client_complete_tool_call(place.principal, chat, "ide", str(turn.id), str(call_id), result)
    assert ToolCall.objects.get(id=call_id).result == result
    # Begin: the catalog's stamp (the snapshot kept, with the client-tool timeout), the turn's
    # part with the call, and the tenant's numbers with the log. Completion: the call with
    # whether its client is announced, then its result with the numbers and the log. What goes
    # together is one statement on PostgreSQL. Each in one transaction (here the test's, so
    # SAVEPOINT and RELEASE).
    postgresql = connection.vendor == "postgresql"
    assert statements(begun) == (3 if postgresql else 5)
    assert statements(completed) == (2 if postgresql else 4)


def statements(captured):
    return len([q for q in captured if not q["sql"].startswith(("SAVEPOINT", "RELEASE"))])


def test_a_burst_of_sockets_whose_clients_joined_no_session_opens_in_three_statements_and_closes_in_two(acme, globex):
    """What most of a churning tenant's sockets are: opened, initialized, closed. A burst of them
    opens in three statements (the rows, the places their clients kept, each tenant's serverSeq)
    and closes in two (inside the test's transaction, each unit's SAVEPOINT and RELEASE too),
    without reading the configuration."""
    acme_seq = take_seqs(acme.tenant.pk, 5)
    openings = [(acme.tenant, f"passing-{i}", "proc", acme.member, "") for i in range(50)]
    with CaptureQueriesContext(connection) as opening:
        rows = actions.do_open_connections([*openings, (globex.tenant, "other", "proc", globex.member, "")])
    assert [seq for _, seq in rows] == [acme_seq] * 50 + [events.current_seq(globex.tenant.pk)]
    assert acme_seq != events.current_seq(globex.tenant.pk)
    assert ClientConnection.objects.filter(tenant=acme.tenant).count() == 50
    asked = []
    with CaptureQueriesContext(connection) as closing:
        assert actions.do_close_connections([c.id for c, _ in rows], lambda t: asked.append(t) or 30000) == []
    assert asked == []
    assert [statements(opening), statements(closing)] == [3, 2]
    assert not ClientConnection.objects.filter(tenant__in=[acme.tenant, globex.tenant]).exists()


def opened(tenant, client_id, person):
    [(connection, _)] = actions.do_open_connections([(tenant, client_id, "proc", person, "")])
    return connection


def test_a_client_that_joined_a_session_keeps_its_place_for_its_tenants_timeout(place, globex):
    own = opened(place.session.tenant, "ide", place.principal.person)
    passing = opened(globex.tenant, "ide", globex.member)
    timeouts = {place.session.tenant_id: 30000, globex.tenant.pk: 5}
    [(pk, due)] = actions.do_close_connections([own.id, passing.id], timeouts.__getitem__)
    assert ActiveClient.objects.get(pk=pk, client_id="ide").release_at == due
    assert due - timezone.now() > timedelta(seconds=20)


def test_a_client_still_connected_elsewhere_keeps_its_place_without_a_timeout(place):
    person = place.principal.person
    first, second = (opened(place.session.tenant, "ide", person) for _ in range(2))
    assert actions.do_close_connections([first.id], lambda t: 30000) == []
    assert ActiveClient.objects.get(client_id="ide").release_at is None
    [(pk, _)] = actions.do_close_connections([second.id], lambda t: 30000)
    assert ActiveClient.objects.get(pk=pk).release_at is not None


def test_a_client_back_before_its_timeout_has_its_place_again_and_nobody_elses(place, globex):
    person = place.principal.person
    own = opened(place.session.tenant, "ide", person)
    [(pk, _)] = actions.do_close_connections([own.id], lambda t: 30000)
    # The same client id opened by another tenant's person in the same burst takes nothing back.
    actions.do_open_connections([(globex.tenant, "ide", "proc", globex.member, "")])
    assert ActiveClient.objects.get(pk=pk).release_at is not None
    actions.do_open_connections([(globex.tenant, "ide", "proc", globex.member, ""),
                                 (place.session.tenant, "ide", "proc", person, "")])
    assert ActiveClient.objects.get(pk=pk).release_at is None
