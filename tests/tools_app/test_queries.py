"""Each hand-written statement of tools_app/queries.py reads what its ORM twin reads, on whichever
database the suite runs on (SQLite, or PostgreSQL with DATABASE_URL)."""
import uuid

import pytest

from sessions_app import actions
from sessions_app.models import ActiveClient, ChatBackend, Session, Turn
from tools_app.actions import do_change_host_config
from tools_app.chat_provider import provider_of
from tools_app.families.mcp_servers.models import SessionMcpServers
from tools_app.models import AgentDefinition, HostConfig
from tools_app.queries import catalog_stamp, running_turn, turn_to_run

from .families.session.conftest import Place

PING = {"name": "ping", "inputSchema": {"type": "object", "properties": {}}}


def values(instance):
    """Every column of a model instance as Python values, or None for no instance."""
    if instance is None:
        return None
    return {field.attname: getattr(instance, field.attname) for field in instance._meta.concrete_fields}


def as_read(turn):
    """A turn with what `turn_to_run` reads with it, column by column."""
    if turn is None:
        return None
    chat = turn.chat
    return (values(turn), values(chat), values(chat.session), values(chat.session.tenant), values(turn.sender))


def orm_turn_to_run(turn_id):
    turn = Turn.objects.select_related("chat__session__tenant", "sender").get(pk=turn_id)
    return turn, provider_of(turn.chat)


def orm_running_turn(session_id):
    return (Turn.objects.select_related("chat__session__tenant", "sender")
            .filter(chat__session_id=session_id, chat__is_default=True, state="active").order_by("started").first())


def orm_catalog_stamp(session):
    if not Session.objects.filter(pk=session.pk).exists():
        return ()
    name = (session.config or {}).get("agentDefinition")
    config = HostConfig.objects.filter(tenant_id=session.tenant_id).values_list("modified", flat=True).first()
    listing = SessionMcpServers.objects.filter(session_id=session.pk).values_list("modified", flat=True).first()
    definition = (AgentDefinition.objects.filter(tenant_id=session.tenant_id, name=name)
                  .values_list("modified", flat=True).first())
    clients = ActiveClient.objects.filter(session_id=session.pk).order_by("id").values_list("id", "modified")
    return tuple((config, listing, definition, *client) for client in (list(clients) or [(None, None)]))


@pytest.fixture
def place(acme):
    return Place(acme)


def test_a_turns_read_at_its_start_matches_its_orm_twin(place, acme):
    side = actions.do_create_chat(place.principal, place.session, uuid.uuid4(), "side")
    ChatBackend.objects.create(chat=side, provider="acp")  # a chat on another agent than its session's
    on_side = actions.do_start_turn(place.principal, side, uuid.uuid4(), "elsewhere")
    nobodys = Turn.objects.create(chat=place.chat, text="a wakeup", state="queued")  # no sender
    for turn_id in (place.turn.pk, on_side.pk, nobodys.pk):
        turn, provider = turn_to_run(turn_id)
        twin, twin_provider = orm_turn_to_run(turn_id)
        assert (as_read(turn), provider) == (as_read(twin), twin_provider)
    assert turn_to_run(on_side.pk)[1] == "acp" and turn_to_run(place.turn.pk)[1] == "echo"
    with pytest.raises(Turn.DoesNotExist):
        turn_to_run(uuid.uuid4())


def test_the_running_turn_of_a_sessions_default_chat_matches_its_orm_twin(place, acme):
    idle = Place(acme)
    actions.do_end_turn(idle.turn.pk, response_text="done")
    for session in (place.session, idle.session):
        assert as_read(running_turn(session.pk)) == as_read(orm_running_turn(session.pk))
    assert running_turn(place.session.pk).pk == place.turn.pk
    assert running_turn(idle.session.pk) is None


def test_a_catalogs_stamp_matches_its_orm_twin_as_its_rows_change(place, acme):
    assert catalog_stamp(place.session) == orm_catalog_stamp(place.session)  # nothing configured yet
    do_change_host_config(acme.principal("admin"), {"advancedTools": True})
    actions.do_set_active_client(place.principal, place.session, "ide", {"clientId": "ide", "tools": [PING]})
    actions.do_set_active_client(place.principal, place.session, "cli", {"clientId": "cli", "tools": []})
    AgentDefinition.objects.create(tenant=acme.tenant, name="reviewer", provider="echo")
    Session.objects.filter(pk=place.session.pk).update(config={"agentDefinition": "reviewer"})
    session = Session.objects.get(pk=place.session.pk)
    stamp = catalog_stamp(session)
    assert stamp == orm_catalog_stamp(session)
    assert len(stamp) == 2 and all(row[0] is not None and row[2] is not None for row in stamp)
    Session.objects.filter(pk=session.pk).delete()
    assert catalog_stamp(session) == orm_catalog_stamp(session) == ()
