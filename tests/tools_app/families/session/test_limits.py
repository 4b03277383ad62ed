"""Orchestration limits: spawn depth, sliding-hour counts per tree (or session), off."""
import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from kernel.refusals import Refused
from sessions_app import actions
from sessions_app.actions import Orchestration
from sessions_app.models import OrchestrationCharge, Session
from tools_app.catalog.validation import ToolRefusal
from tools_app.models import HostConfig

from .conftest import Place, sessionless

NEW = {"relationship": "independent", "prompt": "p", "title": "t"}


def refusal(place, name, **arguments):
    with pytest.raises(Refused) as refused:
        place.call(name, **arguments)
    return refused.value.sentence


def fill(place, kind, count, minutes_ago=10):
    OrchestrationCharge.objects.bulk_create(
        OrchestrationCharge(tenant=place.session.tenant, tree=place.session.root_id, session=place.session.pk,
                            kind=kind, created=timezone.now() - timedelta(minutes=minutes_ago)) for _ in range(count))


def child_place(parent_place, made):
    child = Place.__new__(Place)
    child.people, child.principal = parent_place.people, parent_place.principal
    child.session = Session.objects.get(pk=made["session"].split("/")[-1])
    child.chat = child.session.chats.get(is_default=True)
    child.turn = child.chat.turns.get()
    return child


def test_spawn_depth_stops_at_three(place):
    chain = place
    for _ in range(3):
        chain = child_place(chain, chain.call("create_session", **NEW))
    assert chain.session.depth == 3
    assert refusal(chain, "create_session", **NEW) == (
        "Refusing to create a session: recursion limit reached (max spawn depth 3). "
        "This session was itself created 3 level(s) deep.")


def test_fifty_sessions_per_tree_in_a_sliding_hour(place):
    fill(place, "session", 49, minutes_ago=30)
    child = child_place(place, place.call("create_session", **NEW))  # the 50th, charged to the tree
    assert refusal(child, "create_session", **NEW) == (
        "Refusing to create more sessions: this session tree already used 50 of 50 allowed in the last 60 minutes. "
        "The limit applies to each session tree separately and frees up as older actions leave that window. "
        "Retry after 1800 seconds, or turn off agent orchestration limits in settings.")


def test_chats_and_messages_have_their_own_counts(acme, place):
    fill(place, "chat", 50, minutes_ago=59)
    assert refusal(place, "create_chat", title="t").startswith(
        "Refusing to create more chats: this session tree already used 50 of 50 allowed in the last 60 minutes.")
    assert refusal(place, "create_session", relationship="currentSession", prompt="p", title="t").endswith(
        "Retry after 60 seconds, or turn off agent orchestration limits in settings.")
    fill(place, "message", 100)
    target = Place(acme)
    assert refusal(place, "send_message", session=target.session.uri, message="m") == (
        "Refusing to send more messages: this session tree already used 100 of 100 allowed in the last 60 minutes. "
        "The limit applies to each session tree separately and frees up as older actions leave that window. "
        "Retry after 3000 seconds, or turn off agent orchestration limits in settings.")
    place.call("create_session", **NEW)  # sessions are still free


def test_older_charges_leave_the_window(place):
    fill(place, "session", 50, minutes_ago=61)
    place.call("create_session", **NEW)


def test_a_refused_call_costs_nothing_and_a_done_one_costs_one(acme, place):
    with pytest.raises(ToolRefusal):  # not an agent the session was offered
        place.call("create_session", agent="nope", **NEW)
    with pytest.raises(Refused):
        place.call("create_session", config={"model": 3}, **NEW)
    with pytest.raises(Refused):
        place.call("send_message", session="ahp-session:/00000000-0000-0000-0000-000000000000", message="m")
    assert OrchestrationCharge.objects.count() == 0
    place.call("send_message", session=Place(acme).session.uri, message="m")
    place.call("create_chat", title="c")
    assert sorted(OrchestrationCharge.objects.values_list("kind", flat=True)) == ["chat", "message"]


def test_scope_session_counts_per_session(place):
    HostConfig.for_tenant(place.session.tenant)
    HostConfig.objects.filter(tenant=place.session.tenant).update(agent_orchestration_limits_scope="session")
    child = child_place(place, place.call("create_session", **NEW))
    fill(place, "session", 49)
    assert refusal(place, "create_session", **NEW).startswith(
        "Refusing to create more sessions: this session already used 50 of 50 allowed in the last 60 minutes. "
        "The limit applies to each session separately")
    child.call("create_session", **NEW)  # the same tree, another session


def test_off_turns_depth_and_counts_off(place):
    HostConfig.for_tenant(place.session.tenant)
    HostConfig.objects.filter(tenant=place.session.tenant).update(agent_orchestration_limits="off")
    fill(place, "session", 50)
    Session.objects.filter(pk=place.session.pk).update(depth=3)
    place.refresh().call("create_session", **NEW)


def test_sessionless_calls_spend_no_budget_and_make_unparented_sessions(acme, place):
    made = sessionless("create_session", acme.principal("member"), **NEW)
    session = Session.objects.get(pk=made["session"].split("/")[-1])
    assert (session.parent, session.owner, session.depth) == (None, acme.member, 0)
    assert OrchestrationCharge.objects.count() == 0
    with pytest.raises(Refused) as refused:
        sessionless("create_session", acme.principal("member"), **{**NEW, "relationship": "currentSession"})
    assert refused.value.sentence == "currentSession needs a calling session; use independent"


def test_a_clients_own_sessions_and_turns_are_never_counted(acme, place):
    fill(place, "session", 50)
    for _ in range(3):
        Place(acme, parent=place.session)  # createSession and chat/turnStarted, as a client does
    assert OrchestrationCharge.objects.count() == 50


@pytest.mark.django_db(transaction=True)
def test_sixty_concurrent_creates_in_one_tree_yield_exactly_fifty(acme):
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL: SQLite serialises every writer, so there is no race to lose")
    place = Place(acme)
    orchestration = Orchestration(session=place.session)
    barrier = threading.Barrier(60)
    outcomes = []

    def create():
        try:
            barrier.wait()
            actions.do_tool_create_session(place.principal, orchestration, "echo", "t", "p")
            outcomes.append("made")
        except Refused as refused:
            outcomes.append(refused.sentence[:40])
        finally:
            connection.close()

    threads = [threading.Thread(target=create) for _ in range(60)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert outcomes.count("made") == 50
    assert Session.objects.filter(root_id=place.session.pk).exclude(pk=place.session.pk).count() == 50
    assert OrchestrationCharge.objects.filter(kind="session").count() == 50
