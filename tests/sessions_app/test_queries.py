"""Each hand-written statement of sessions_app.queries answers what its ORM twin answers, on the
database the suite runs on (run it on SQLite and on PostgreSQL)."""
import uuid
from typing import Any

import pytest
from django.db import transaction
from django.db.models import F, Model

from sessions_app import actions, queries
from sessions_app.events.log import PROCESS, Item, publish_many
from sessions_app.models import (
    PUBLISHED_TOOLS,
    ActionLog,
    ActiveClient,
    Chat,
    ClientConnection,
    PendingMessage,
    ServerSeq,
    ToolCall,
    Turn,
    TurnEffect,
)


def columns(instance: Model | None) -> dict[str, Any] | None:
    """What an instance holds of its row: its loaded columns, as the ORM converts them."""
    if instance is None:
        return None
    loaded = instance.get_deferred_fields()
    return {f.attname: getattr(instance, f.attname) for f in instance._meta.concrete_fields if f.attname not in loaded}


@pytest.fixture
def place(acme: Any) -> Any:
    """A session of acme's member with a running turn, a client's open call in it and the
    client's place in the session."""
    class Place:
        principal = acme.principal("member")
        session = actions.do_create_session(principal, uuid.uuid4())
        chat = session.chats.get()
        turn = actions.do_start_turn(principal, chat, uuid.uuid4(), "hello")
        client = actions.do_set_active_client(principal, session, "ide", {"clientId": "ide", "tools": []})
        call = actions.do_begin_tool_call(Turn.objects.select_related("chat__session").get(pk=turn.pk),
                                          "ask", {"q": 1}, client_id="ide")
    return Place


def test_a_chat_and_its_session_as_the_orm_reads_them(place: Any, acme: Any, globex: Any) -> None:
    for chat_id, tenant in [(place.chat.id, acme.tenant), (place.chat.id, globex.tenant), (uuid.uuid4(), acme.tenant)]:
        found = queries.chat_in_tenant(chat_id, tenant.pk)
        twin = (Chat.objects.select_related("session").defer(f"session__{PUBLISHED_TOOLS}")
                .filter(id=chat_id, session__tenant_id=tenant.pk).first())
        assert columns(found) == columns(twin)
        assert columns(found and found.session) == columns(twin and twin.session)


@pytest.mark.django_db(transaction=True)
def test_a_locked_turn_with_its_chat_and_session_as_the_orm_reads_them(place: Any) -> None:
    for turn_id in [place.turn.id, uuid.uuid4()]:
        with transaction.atomic():
            found = queries.locked_turn(turn_id)
            twin = (Turn.objects.select_for_update(of=("self",)).select_related("chat__session")
                    .defer(f"chat__session__{PUBLISHED_TOOLS}").filter(id=turn_id).first())
        assert columns(found) == columns(twin)
        assert columns(found and found.chat) == columns(twin and twin.chat)
        assert columns(found and found.chat.session) == columns(twin and twin.chat.session)


def test_a_turns_leftovers_as_the_orm_counts_them(place: Any) -> None:
    def twin() -> tuple[bool, bool]:
        return (TurnEffect.objects.filter(turn_id=place.turn.id).exists(),
                PendingMessage.objects.filter(chat_id=place.chat.id, status="pending").exists())

    assert queries.turn_leftovers(place.turn.id, place.chat.id) == twin() == (False, False)
    actions.do_add_turn_effect(place.principal, place.turn, "set_workspace", {})
    actions.do_send_message(place.principal, place.chat, "next")  # the chat is busy: it waits
    assert queries.turn_leftovers(place.turn.id, place.chat.id) == twin() == (True, True)


def test_a_part_appended_to_an_active_turn_with_its_row_as_the_orm_would_write_them(place: Any) -> None:
    before = Turn.objects.get(pk=place.turn.pk).response_parts
    call = ToolCall(turn_id=place.turn.id, tenant_id=place.session.tenant_id, tool_name="t", input={"a": [1, "b"]})
    part = {"kind": "toolCall", "toolCallId": str(call.id)}

    assert queries.append_part_if_active(place.turn.id, part, call) is True

    assert Turn.objects.get(pk=place.turn.pk).response_parts == [*before, part]
    assert columns(ToolCall.objects.get(pk=call.pk)) == columns(call)

    Turn.objects.filter(pk=place.turn.pk).update(state="complete")
    late = ToolCall(turn_id=place.turn.id, tenant_id=place.session.tenant_id, tool_name="t")
    assert queries.append_part_if_active(place.turn.id, {"kind": "toolCall"}, late) is False
    assert Turn.objects.get(pk=place.turn.pk).response_parts == [*before, part]


@pytest.mark.django_db(transaction=True)
def test_an_open_call_as_the_orm_reads_it(place: Any) -> None:
    for call_id in [place.call.id, uuid.uuid4()]:
        with transaction.atomic():
            found = queries.locked_open_call(call_id)
            twin = ToolCall.objects.select_for_update().filter(id=call_id, completed__isnull=True).first()
        assert columns(found) == columns(twin)
    actions.do_complete_tool_call(place.call.id, {"success": True, "pastTenseMessage": "done", "content": []})
    with transaction.atomic():
        assert queries.locked_open_call(place.call.id) is None


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("who", ["member", "guest", "root"])
def test_a_clients_call_in_a_chat_as_the_orm_reads_it(place: Any, acme: Any, who: str) -> None:
    person_id = None if who == "root" else getattr(acme, who).pk
    for chat, turn_id, call_id in [(place.chat, place.turn.id, place.call.id),
                                   (place.chat, uuid.uuid4(), place.call.id),
                                   (place.chat, place.turn.id, uuid.uuid4())]:
        with transaction.atomic():
            found, announced = queries.locked_call_in(chat, turn_id, call_id, "ide", person_id)
            twin = ToolCall.objects.select_for_update(of=("self",)).filter(
                id=call_id, turn_id=turn_id, turn__chat_id=chat.pk).first()
            twin_announced = twin is not None and ActiveClient.objects.filter(
                session_id=chat.session_id, client_id="ide", owner_id=person_id).exists()
        assert columns(found) == columns(twin)
        assert announced == twin_announced
        assert found is None or (found.turn_id, found.turn and found.turn.chat) == (turn_id, chat)


def test_places_of_clients_as_the_orm_reads_them(place: Any, acme: Any, globex: Any) -> None:
    other = actions.do_create_session(globex.principal("member"), uuid.uuid4())
    actions.do_set_active_client(globex.principal("member"), other, "ide", {"clientId": "ide", "tools": []})
    ActiveClient.objects.filter(session=other).update(release_at=other.modified)

    for released_only in (False, True):
        rows = ActiveClient.objects.filter(client_id__in=["ide", "cli"])
        if released_only:
            rows = rows.filter(release_at__isnull=False)
        twin = rows.values_list("id", "session__tenant_id", "client_id", "owner_id")
        assert sorted(queries.places_of(["ide", "cli"], released_only), key=str) == sorted(twin, key=str)
        assert len(twin) == (1 if released_only else 2)


def test_closed_connections_as_the_orm_reads_them_before_deleting(acme: Any) -> None:
    openings = [(acme.tenant, "ide", "proc", acme.member, ""), (acme.tenant, "", "proc", None, ""),
                (acme.tenant, "cli", "proc", acme.guest, "")]
    opened = [c.id for c, _ in actions.do_open_connections(openings)]
    closing = [*opened[:2], uuid.uuid4()]
    twin = list(ClientConnection.objects.filter(id__in=closing).values_list("tenant_id", "client_id", "person_id"))

    assert sorted(queries.delete_connections(closing), key=str) == sorted(twin, key=str)
    assert list(ClientConnection.objects.values_list("id", flat=True)) == [opened[2]]


def test_a_counters_step_and_reading_as_the_orms(acme: Any, globex: Any) -> None:
    actions.do_create_session(acme.principal("member"), uuid.uuid4())  # acme has a counter; globex not yet
    before = ServerSeq.objects.get(tenant=acme.tenant).value

    assert queries.step_counter(acme.tenant.pk, 3) == before + 3 == ServerSeq.objects.get(tenant=acme.tenant).value
    assert queries.step_counter(globex.tenant.pk, 3) is None
    assert not ServerSeq.objects.filter(tenant=globex.tenant).exists()

    ServerSeq.objects.filter(tenant=acme.tenant).update(value=F("value") + 2)
    twin = dict(ServerSeq.objects.filter(tenant_id__in=[acme.tenant.pk, globex.tenant.pk])
                .values_list("tenant_id", "value"))
    assert queries.counters([acme.tenant.pk, globex.tenant.pk]) == twin == {acme.tenant.pk: before + 5}


def test_the_action_log_holds_what_was_published_as_the_orm_reads_it(acme: Any, globex: Any) -> None:
    """The log's rows (written on PostgreSQL with the counter's step in one statement, elsewhere by
    one INSERT) are the envelopes published, numbered as the counter says, for a tenant with a
    counter and for one whose first action makes it."""
    for tenant in (acme.tenant, globex.tenant):
        items: list[Item] = [("ahp-session:/a", {"type": "x", "n": 1}, None),
                             ("ahp-session:/b", {"type": "y"}, {"clientSeq": 2})]
        with transaction.atomic():
            envelopes = publish_many(tenant.pk, items)
        rows = ActionLog.objects.filter(tenant=tenant).order_by("seq")
        assert [(row.seq, row.channel, row.envelope) for row in rows][-2:] == [
            (env["serverSeq"], env["channel"], env) for env in envelopes]
        assert ServerSeq.objects.get(tenant=tenant).value == envelopes[-1]["serverSeq"]
        assert {row.process for row in rows} == {PROCESS}
