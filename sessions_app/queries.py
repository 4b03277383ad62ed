"""The hand-written statements of sessions_app, each on one of the host's hottest paths: every
published action, every step of a turn, every tool call's begin and end, every socket opening
and closing, every action on a chat. There the ORM spent longer composing a statement than the
database answering it. Each has an ORM twin in tests/sessions_app/test_queries.py that answers
the same rows on SQLite and PostgreSQL; a statement off these paths is the ORM's."""
import functools
import json
import uuid
from collections.abc import Collection, Sequence
from typing import Any

from django.db import connection
from django.db.models import Model

from kernel.rows import Columns, fetch_one, insert_then, marks, table

from .models import (
    PUBLISHED_TOOLS,
    ActionLog,
    ActiveClient,
    Chat,
    ClientConnection,
    PendingMessage,
    ServerSeq,
    Session,
    ToolCall,
    Turn,
    TurnEffect,
)

Id = uuid.UUID | str
# A session's place held by a client: (ActiveClient pk, the session's tenant, client id, owner or None).
Place = tuple[int, int, str, int | None]


def key(model: type[Model], value: object) -> Any:
    """`value` as the database takes `model`'s primary key."""
    return model._meta.pk.get_db_prep_value(value, connection)


# A chat and its session (all but its published tools): every action on a chat reads it.

def chat_in_tenant(chat_id: Id, tenant_id: int) -> Chat | None:
    columns, sql = _chat_reading()
    found = fetch_one(columns, sql, [key(Chat, chat_id), tenant_id])
    if found is None:
        return None
    (chat, session), _ = found
    chat.session = session
    return chat


@functools.cache
def _chat_reading() -> tuple[tuple[Columns, Columns], str]:
    columns = (Columns(Chat, "c"), Columns(Session, "s", leave=(PUBLISHED_TOOLS,)))
    return columns, (f"SELECT {columns[0].sql}, {columns[1].sql} FROM {table(Chat)} c "
                     f"JOIN {table(Session)} s ON s.id = c.session_id WHERE c.id = %s AND s.tenant_id = %s")


# A turn, its row locked, with its chat and session (all but its published tools): every piece
# of a streamed reply and every turn's end reads it.

def locked_turn(turn_id: Id) -> Turn | None:
    columns, sql = _turn_reading()
    found = fetch_one(columns, sql, [key(Turn, turn_id)])
    if found is None:
        return None
    (turn, chat, session), _ = found
    turn.chat, chat.session = chat, session
    return turn


@functools.cache
def _turn_reading() -> tuple[tuple[Columns, Columns, Columns], str]:
    columns = (Columns(Turn, "t"), Columns(Chat, "c"), Columns(Session, "s", leave=(PUBLISHED_TOOLS,)))
    lock = " FOR UPDATE OF t" if connection.features.has_select_for_update_of else ""
    return columns, (f"SELECT {', '.join(c.sql for c in columns)} FROM {table(Turn)} t "
                     f"JOIN {table(Chat)} c ON c.id = t.chat_id JOIN {table(Session)} s ON s.id = c.session_id "
                     f"WHERE t.id = %s{lock}")


def turn_leftovers(turn_id: Id, chat_id: Id) -> tuple[bool, bool]:
    """(whether the turn has effects waiting, whether its chat has a message pending): read at
    every turn's end."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT EXISTS(SELECT 1 FROM {table(TurnEffect)} WHERE turn_id = %s), "
                       f"EXISTS(SELECT 1 FROM {table(PendingMessage)} WHERE chat_id = %s AND status = 'pending')",
                       [key(Turn, turn_id), key(Chat, chat_id)])
        effects, pending = cursor.fetchone()
    return bool(effects), bool(pending)


def append_part_if_active(turn_id: Id, part: dict[str, Any], new_row: Model) -> bool:
    """Append `part` to the active turn's response_parts in one UPDATE, computed in the
    statement (the row is not read first, and a part another writer appended meanwhile is
    kept), which locks the turn until commit, and write `new_row` (the part's own row, a
    tool call) with it, on PostgreSQL in the same statement. Answers whether the turn was
    still active; if not, the caller's transaction must not commit the row (it raises)."""
    return insert_then(new_row, _append_part_sql(), [json.dumps(part), key(Turn, turn_id)]) == 1


@functools.cache
def _append_part_sql() -> str:
    parts = "response_parts"
    appended = (f"({parts} || jsonb_build_array(%s::jsonb))" if connection.vendor == "postgresql"
                else f"json_insert({parts}, '$[#]', json(%s))")
    return f"UPDATE {table(Turn)} SET {parts} = {appended} WHERE id = %s AND state = 'active'"


# Tool calls: a host call's completion, a client's completion and progress.

def locked_open_call(call_id: Id) -> ToolCall | None:
    """The open call's row alone, locked (its turn's columns, every part of a long reply, and its
    session's published tools were most of what a host call's completion decoded)."""
    columns, sql = _open_call_reading()
    found = fetch_one([columns], sql, [key(ToolCall, call_id)])
    return None if found is None else found[0][0]


@functools.cache
def _open_call_reading() -> tuple[Columns, str]:
    columns = Columns(ToolCall, "c")
    lock = " FOR UPDATE" if connection.features.has_select_for_update else ""
    return columns, f"SELECT {columns.sql} FROM {table(ToolCall)} c WHERE c.id = %s AND c.completed IS NULL{lock}"


def locked_call_in(chat: Chat, turn_id: Id, tool_call_id: Id, client_id: str,
                   person_id: int | None) -> tuple[ToolCall | None, bool]:
    """(the call `tool_call_id` of turn `turn_id` in `chat`, open or completed, locked, its turn
    holding only its id and `chat`; or None), and whether the person `person_id` (None: the
    tenant's root) announced `client_id` in the chat's session. The turn is joined only to check
    the call is of this chat: its columns are not read."""
    columns, sql = _call_reading(person_id is None)
    announced = [key(Session, chat.session_id), client_id, *([] if person_id is None else [person_id])]
    found = fetch_one([columns], sql, [*announced, key(ToolCall, tool_call_id), key(Turn, turn_id), key(Chat, chat.pk)])
    if found is None:
        return None, False
    (call,), (is_announced,) = found
    call.turn = Turn.from_db(connection.alias, ["id", "chat_id"], [call.turn_id, chat.pk])
    call.turn.chat = chat
    return call, bool(is_announced)


@functools.cache
def _call_reading(by_root: bool) -> tuple[Columns, str]:
    columns = Columns(ToolCall, "c")
    lock = " FOR UPDATE OF c" if connection.features.has_select_for_update_of else ""
    owner = "a.owner_id IS NULL" if by_root else "a.owner_id = %s"
    announced = (f"EXISTS (SELECT 1 FROM {table(ActiveClient)} a WHERE a.session_id = %s AND a.client_id = %s "
                 f"AND {owner})")
    return columns, (f"SELECT {columns.sql}, {announced} FROM {table(ToolCall)} c "
                     f"JOIN {table(Turn)} t ON t.id = c.turn_id WHERE c.id = %s AND c.turn_id = %s AND t.chat_id = %s{lock}")


# Sockets opening and closing, in bursts.

def places_of(client_ids: Sequence[str], released_only: bool = False) -> list[Place]:
    """The places in sessions clients of these ids hold (only those waiting for their release:
    `released_only`), in any tenant: the caller matches tenant and person."""
    released = "a.release_at IS NOT NULL AND " if released_only else ""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT a.id, s.tenant_id, a.client_id, a.owner_id FROM {table(ActiveClient)} a "
                       f"JOIN {table(Session)} s ON s.id = a.session_id "
                       f"WHERE {released}a.client_id IN ({marks(client_ids)})", list(client_ids))
        return [tuple(row) for row in cursor.fetchall()]


def delete_connections(connection_ids: Collection[Id]) -> list[tuple[int, str, int | None]]:
    """Delete the connections; answers (tenant, client id, person) of each deleted."""
    ids = [key(ClientConnection, pk) for pk in connection_ids]
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {table(ClientConnection)} WHERE id IN ({marks(ids)}) "
                       "RETURNING tenant_id, client_id, person_id", ids)
        return [tuple(row) for row in cursor.fetchall()]


# Each tenant's action counter and the action log: every published action.

def step_counter(tenant_id: int, count: int) -> int | None:
    """Advance the tenant's counter by `count` (taking its row lock until commit); answers its
    new value, or None when the tenant has no counter yet."""
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {table(ServerSeq)} SET value = value + %s WHERE tenant_id = %s RETURNING value",
                       [count, tenant_id])
        row = cursor.fetchone()
    return None if row is None else row[0]


def counters(tenant_ids: Collection[int]) -> dict[int, int]:
    """{tenant id: its counter's value} of those that have one: read by every `initialize`."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT tenant_id, value FROM {table(ServerSeq)} WHERE tenant_id IN ({marks(list(tenant_ids))})",
                       list(tenant_ids))
        return dict(cursor.fetchall())


def log_rows(rows: Sequence[Sequence[Any]]) -> None:
    """Write action log rows (seq, tenant, channel, envelope, process, created), prepared, in one INSERT."""
    with connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO {table(ActionLog)} (seq, tenant_id, channel, envelope, process, created) "
                       f"VALUES {', '.join(['(%s, %s, %s, %s, %s, %s)'] * len(rows))}",
                       [value for row in rows for value in row])


def step_and_log(tenant_id: int, items: Sequence[Sequence[Any]], process: str, created: Any,
                 write: tuple[str, Sequence[Any]] | None = None) -> int | None:
    """PostgreSQL only: the caller's `write` (sql, params), the counter's step and the log's rows,
    one (channel, envelope) of `items` each, in one statement. Each row's seq (and its envelope's
    serverSeq) is the stepped counter's value less the rows after it. Answers the newest value,
    or None when the tenant has no counter yet (`write` ran)."""
    write_sql, write_params = write or ("", [])
    numbered = [value for i, (channel, envelope) in enumerate(items, 1) for value in (i, channel, envelope)]
    with connection.cursor() as cursor:
        cursor.execute(_numbered_log_sql(len(items), write_sql),
                       [*write_params, len(items), tenant_id, tenant_id, process, created, *numbered])
        row = cursor.fetchone()
    return None if row is None else row[0]


@functools.cache
def _numbered_log_sql(count: int, write_sql: str) -> str:
    items = ", ".join(["(%s::int, %s, %s::jsonb)"] * count)
    write = f"written AS ({write_sql}), " if write_sql else ""
    return (f"WITH {write}counter AS "
            f"(UPDATE {table(ServerSeq)} SET value = value + %s WHERE tenant_id = %s RETURNING value) "
            f"INSERT INTO {table(ActionLog)} (seq, tenant_id, channel, envelope, process, created) "
            f"SELECT counter.value - {count} + item.i, %s, item.channel, "
            f"jsonb_set(item.envelope, '{{serverSeq}}', to_jsonb(counter.value - {count} + item.i)), %s, %s "
            f"FROM counter, (VALUES {items}) AS item(i, channel, envelope) RETURNING (SELECT value FROM counter)")
