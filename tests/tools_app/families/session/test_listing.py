"""list_sessions, get_current_session, list_agents, list_models."""
from datetime import timedelta

import pytest
from django.utils import timezone

from kernel.refusals import Refused
from sessions_app import actions
from sessions_app.models import Chat, ChatBackend, Session
from tools_app.families.session.links import open_link

from .conftest import sessionless


def test_it_lists_the_catalogue_rows(place, make_place, workspace):
    other = make_place(folders=[f"file://{workspace}/repo"])
    Session.objects.filter(pk=other.session.pk).update(title="Other", read=False)
    rows = {r["session"]: r for r in place.call("list_sessions")["sessions"]}
    row = rows[other.session.uri]
    assert row["openLink"] == f"agent-host-session://echo/{other.session.id}"
    assert (row["title"], row["status"], row["unread"], row["workingDirectory"]) == (
        "Other", "inProgress", True, f"file://{workspace}/repo")
    assert {"createdAt", "modifiedAt"} <= set(row) and "chats" not in row


def test_it_lists_chats_main_first_without_worker_or_hidden_ones(place, worktree_agent):
    side = actions.do_create_chat(place.principal, place.session, "11111111-1111-1111-1111-111111111111", "Side")
    ChatBackend.objects.create(chat=side, provider=worktree_agent)
    Chat.objects.create(session=place.session, origin_kind="tool", origin_chat=place.chat, title="worker")
    Chat.objects.create(session=place.session, title="hidden", archived=True)
    row = place.call("list_sessions", session=place.session.uri)["sessions"][0]
    assert row["chats"] == [
        # The main chat is named after its first message ("working"): the deferred title strategy.
        {"title": "working", "openLink": open_link(place.session), "status": "inProgress", "main": True},
        {"title": "Side", "openLink": f"{open_link(place.session)}?chat={side.id}", "status": "idle",
         "harness": worktree_agent},
    ]


def test_it_filters_by_status_workspace_unread_time_and_archive(place, make_place, workspace):
    done = make_place(folders=[f"{workspace}/a"])
    actions.do_end_turn(done.turn.id, response_text="ok")
    archived = make_place()
    Session.objects.filter(pk=archived.session.pk).update(archived=True)
    Session.objects.filter(pk=done.session.pk).update(read=False, created=timezone.now() - timedelta(days=3))

    def listed(**filters):
        return {r["session"] for r in place.call("list_sessions", **filters)["sessions"]}

    assert archived.session.uri not in listed()
    assert archived.session.uri in listed(includeArchived=True) and listed(status=["archived"]) == {
        archived.session.uri}
    assert listed(status=["idle"]) == {done.session.uri}
    assert listed(workspace=f"file://{workspace}/a") == {done.session.uri}
    assert listed(unread=True) == {done.session.uri}
    assert done.session.uri not in listed(createdAfter=(timezone.now() - timedelta(days=1)).isoformat())
    assert listed(createdBefore=(timezone.now() - timedelta(days=1)).isoformat()) == {done.session.uri}
    with pytest.raises(Refused) as refused:
        place.call("list_sessions", createdAfter="yesterday")
    assert refused.value.sentence == ("Invalid list_sessions input: createdAfter must be an ISO-8601 timestamp "
                                      "(e.g. 2025-01-31T00:00:00Z).")


def test_the_listing_is_cut_to_what_the_person_may_read(acme, place):
    acme.tenant.roles.create(name="nobody", grants=[])
    from grants.actions import do_add_member

    stranger = do_add_member(acme.tenant, "acme-stranger", "nobody").person
    from grants.models import Principal

    assert place.call("list_sessions", principal=Principal.for_person(acme.tenant, stranger)) == {"sessions": []}
    assert len(place.call("list_sessions", principal=acme.principal("guest"))["sessions"]) == 1


def test_get_current_session_answers_its_own_row(place):
    assert place.call("get_current_session")["session"] == place.session.uri


def test_list_agents_and_list_models(place, worktree_agent, monkeypatch):
    monkeypatch.delenv("AHP_ACP_AGENT_COMMAND", raising=False)
    agents = {a["id"]: a for a in place.call("list_agents")["agents"]}
    assert "acp" not in agents and "acp" not in {m["agent"] for m in place.call("list_models")["models"]}
    assert agents[worktree_agent]["settings"] == ["effort", "isolation", "model"]
    assert [m["id"] for m in agents[worktree_agent]["models"]] == [f"wt-{i}" for i in range(5)]
    assert agents["echo"]["displayName"] == "Echo"
    assert {"echo", worktree_agent} <= {m["agent"] for m in place.call("list_models")["models"]}
    assert len(place.call("list_models", agent=worktree_agent)["models"]) == 7
    with pytest.raises(Refused) as refused:
        place.call("list_models", agent="nope")
    assert refused.value.sentence == 'No agent "nope" you may start; list_agents names the agents you may.'


def test_a_guest_may_start_no_agent(acme, place):
    assert place.call("list_agents", principal=acme.principal("guest")) == {"agents": []}
    assert place.call("list_models", principal=acme.principal("guest")) == {"models": []}


def test_a_guest_reads_sessionless(acme, place):
    assert len(sessionless("list_sessions", acme.principal("guest"))["sessions"]) == 1
