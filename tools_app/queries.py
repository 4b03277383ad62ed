"""The tools app's hand-written SQL, for statements on the hottest paths, where the ORM spends
far longer composing a statement than the database answers it: a turn's read at its start (and
an attached agent's call), and the stamps a chat's kept catalog is checked against on every model
request. Each has an ORM twin in tests/tools_app/test_queries.py that must read the same, on
both databases."""
import functools
from collections.abc import Callable
from typing import Any

from django.contrib.auth import get_user_model
from django.db import connection

from grants.models import Tenant
from kernel.rows import Columns, concrete_field, fetch_one, table, value_reader
from sessions_app.models import PUBLISHED_TOOLS, ActiveClient, Chat, ChatBackend, Session, Turn

from .chat_provider import answering
from .families.mcp_servers.models import SessionMcpServers
from .models import AgentDefinition, HostConfig

# The catalog's stamps of a session: (HostConfig's, the MCP listing's, the named agent definition's,
# an active client's id, its stamp), one row per active client (one with None for the client without any).
Stamp = tuple[tuple[Any, ...], ...]


def turn_to_run(turn_id: Any) -> tuple[Turn, str]:
    """The turn, with what its run reads: its chat, session (all but its published tools), tenant
    and sender; and the provider that answers it. Read at every turn's start."""
    found = _first_turn("t.id = %s", [Turn._meta.pk.get_db_prep_value(turn_id, connection)])
    if found is None:
        raise Turn.DoesNotExist(f"No turn {turn_id}.")
    return found


def running_turn(session_id: Any) -> Turn | None:
    """The session's default chat's active turn, read as `turn_to_run` reads one, or None."""
    found = _first_turn("c.session_id = %s AND c.is_default = %s AND t.state = 'active' ORDER BY t.started LIMIT 1",
                        [Session._meta.pk.get_db_prep_value(session_id, connection), True])
    return None if found is None else found[0]


def _first_turn(condition: str, params: list[Any]) -> tuple[Turn, str] | None:
    columns, sql = _turn_reading(condition)
    found = fetch_one(columns, sql, params)
    if found is None:
        return None
    (turn, chat, session, tenant, sender), (backend_provider,) = found
    session.tenant, chat.session, turn.chat, turn.sender = tenant, session, chat, sender
    return turn, answering(backend_provider, session)


@functools.cache
def _turn_reading(condition: str) -> tuple[tuple[Columns, ...], str]:
    """The statement of `_first_turn`: `condition` on the turn `t` and its chat `c`."""
    person = get_user_model()
    columns = (Columns(Turn, "t"), Columns(Chat, "c"), Columns(Session, "s", leave=(PUBLISHED_TOOLS,)),
               Columns(Tenant, "n"), Columns(person, "u"))
    return columns, (
        f"SELECT {', '.join(c.sql for c in columns)}, (SELECT b.provider FROM {table(ChatBackend)} b "
        f"WHERE b.chat_id = c.id AND b.provider <> '') FROM {table(Turn)} t JOIN {table(Chat)} c ON c.id = t.chat_id "
        f"JOIN {table(Session)} s ON s.id = c.session_id JOIN {table(Tenant)} n ON n.id = s.tenant_id "
        f"LEFT JOIN {table(person)} u ON u.id = t.sender_id WHERE {condition}")


def catalog_stamp(session: Session) -> Stamp:
    """What changes whenever a row the session's catalog reads is written (tools_app.catalog.loader):
    the stamps of the tenant's HostConfig, the session's MCP listing and its named agent definition,
    then each active client's id and stamp. One statement; empty when the session is gone."""
    name = (session.config or {}).get("agentDefinition")
    session_id = Session._meta.pk.get_db_prep_value(session.pk, connection)
    sql, readers = _stamp_reading()
    with connection.cursor() as cursor:
        cursor.execute(sql, [name if isinstance(name, str) else None, session_id])
        return tuple(tuple(read(value) for read, value in zip(readers, row, strict=True)) for row in cursor.fetchall())


@functools.cache
def _stamp_reading() -> tuple[str, tuple[Callable[[Any], Any], ...]]:
    """The statement of `catalog_stamp` (in SQL every backend takes), and a reader per column."""
    sql = (f"SELECT (SELECT c.modified FROM {table(HostConfig)} c WHERE c.tenant_id = s.tenant_id), "
           f"(SELECT m.modified FROM {table(SessionMcpServers)} m WHERE m.session_id = s.id), "
           f"(SELECT d.modified FROM {table(AgentDefinition)} d WHERE d.tenant_id = s.tenant_id AND d.name = %s), "
           f"a.id, a.modified FROM {table(Session)} s LEFT JOIN {table(ActiveClient)} a ON a.session_id = s.id "
           "WHERE s.id = %s ORDER BY a.id")
    columns = ((HostConfig, "modified", "c"), (SessionMcpServers, "modified", "m"), (AgentDefinition, "modified", "d"),
               (ActiveClient, "id", "a"), (ActiveClient, "modified", "a"))
    return sql, tuple(value_reader(concrete_field(model, name), alias) for model, name, alias in columns)
