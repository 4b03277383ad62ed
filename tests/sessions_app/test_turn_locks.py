"""A turn's writers lock its row only, so a turn starting in the same chat never deadlocks with them."""
import threading
import time
import uuid

import pytest
from django.db import connection, transaction
from django.utils import timezone

from sessions_app import actions
from sessions_app.models import Chat, Session, Turn


def waiting_on_a_lock(backend_pid):
    with connection.cursor() as cursor:
        cursor.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", [backend_pid])
        row = cursor.fetchone()
    return row is not None and row[0] == "Lock"


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("late_write", ["stream", "end", "cancel"])
def test_an_ended_turns_late_write_and_the_next_turns_start_both_go_through(acme, late_write):
    """What the agent sends for its turn while the person's next turn in that chat begins (the
    start writes the session, then the chat) both land. Locking the turn's chat and session with
    it took them in the other order, and PostgreSQL killed one as a deadlock."""
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL: SQLite serialises every writer")
    principal = acme.principal("member")
    session = actions.do_create_session(principal, str(uuid.uuid4()))
    chat = session.chats.get()
    turn = actions.do_start_turn(principal, chat, uuid.uuid4(), "hello")
    write = {
        "stream": lambda: actions.do_stream_reply(turn.id, "part of the answer"),
        "end": lambda: actions.do_end_turn(turn.id, "the answer"),
        "cancel": lambda: actions.do_cancel_turn(principal, chat, turn.id),
    }[late_write]
    session_written, writer_pid, failures = threading.Event(), [], []

    def starting():  # a turn's start, held open between its two writes
        try:
            with transaction.atomic():
                Session.objects.filter(pk=session.pk).update(modified=timezone.now())
                session_written.set()
                deadline = time.monotonic() + 10
                while writer.is_alive() and not (writer_pid and waiting_on_a_lock(writer_pid[0])):
                    assert time.monotonic() < deadline
                    time.sleep(0.05)
                Chat.objects.filter(pk=chat.pk).update(modified=timezone.now())
        except Exception as error:  # noqa: BLE001 - the assertion below names it
            failures.append(error)
        finally:
            connection.close()

    def writing():
        try:
            assert session_written.wait(10)
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_backend_pid()")
                writer_pid.append(cursor.fetchone()[0])
            write()
        except Exception as error:  # noqa: BLE001
            failures.append(error)
        finally:
            connection.close()

    writer = threading.Thread(target=writing)
    starter = threading.Thread(target=starting)
    starter.start()
    writer.start()
    starter.join(30)
    writer.join(30)
    assert failures == []
    assert Turn.objects.get(pk=turn.pk).state == {"stream": "active", "end": "complete", "cancel": "cancelled"}[late_write]
