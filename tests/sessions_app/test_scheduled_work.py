"""Deadlines and releases are rows; the tasks and the sweep act on rows that are due, once."""
from datetime import timedelta

from django.utils import timezone

from sessions_app import actions
from sessions_app.models import ActionLog, ActiveClient, ClientConnection, Session, ToolCall, Turn
from sessions_app.tasks import expire_tool_call, release_client, sweep_due_work


def open_client_call(people, deadline_in):
    session = actions.do_create_session(people.principal("member"), "7a9d8a32-5c4b-4e43-9bd5-0c6f1f1d9a10")
    chat = session.chats.get()
    actions.do_set_active_client(people.principal("member"), session, "ide",
                                 {"clientId": "ide", "tools": [{"name": "open_file"}]})
    turn = actions.do_start_turn(people.principal("member"), chat, "0b3cbd5c-1b53-4bd8-8b62-8f2a0f8f0a11", "go")
    call = actions.do_begin_tool_call(turn, "open_file", {}, client_id="ide", timeout_ms=1000)
    ToolCall.objects.filter(pk=call.pk).update(deadline=timezone.now() + deadline_in)
    return session, call


def test_a_deadline_task_before_the_deadline_changes_nothing(acme):
    _, call = open_client_call(acme, timedelta(minutes=5))
    expire_tool_call(str(call.id))
    assert ToolCall.objects.get(pk=call.pk).completed is None


def test_the_sweep_fails_a_call_past_its_deadline_exactly_once(acme):
    _, call = open_client_call(acme, timedelta(seconds=-1))
    sweep_due_work()
    sweep_due_work()
    expire_tool_call(str(call.id))
    call.refresh_from_db()
    assert call.result["error"]["message"] == "open_file got no answer from ide in 1 s"
    completes = [row for row in ActionLog.objects.all() if row.envelope["action"]["type"] == "chat/toolCallComplete"]
    assert len(completes) == 1


def test_a_release_fires_only_when_due_and_only_once(acme):
    session, call = open_client_call(acme, timedelta(minutes=5))
    row = ActiveClient.objects.get(session=session)
    ActiveClient.objects.filter(pk=row.pk).update(release_at=timezone.now() + timedelta(minutes=1))
    release_client(row.pk)
    assert ActiveClient.objects.filter(pk=row.pk).exists()
    ActiveClient.objects.filter(pk=row.pk).update(release_at=timezone.now() - timedelta(seconds=1))
    sweep_due_work()
    release_client(row.pk)
    call.refresh_from_db()
    assert not ActiveClient.objects.filter(pk=row.pk).exists()
    assert call.result["error"]["message"] == "Client ide disconnected before completing open_file"


def test_connections_of_a_dead_process_are_closed_by_the_sweep(acme):
    session, call = open_client_call(acme, timedelta(minutes=5))
    from tools_app.models import HostConfig

    HostConfig.objects.update_or_create(tenant=acme.tenant, defaults={"client_tool_call_disconnect_timeout_ms": 0})
    ClientConnection.objects.create(tenant=acme.tenant, client_id="ide", person=acme.member, process="dead-process",
                                    seen=timezone.now() - timedelta(minutes=5))
    sweep_due_work()
    assert not ClientConnection.objects.exists()
    call.refresh_from_db()
    assert call.result["error"]["message"] == "Client ide disconnected before completing open_file"
    assert Session.objects.get(pk=session.pk).status == Session.IN_PROGRESS
    assert Turn.objects.get().state == "active"  # the agent, not the sweep, ends its turn
