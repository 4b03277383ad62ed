"""Model instances read and written by hand-written SQL, for the host's most frequent statements
(a socket's opening and closing, a tool call's begin and end): the ORM spends far longer
composing those than the database answers them. Values go through the converters the ORM's own
reads and writes apply (a datetime made aware on SQLite, a UUID parsed, JSON loaded), so an
instance made here equals one the ORM would make."""
import functools
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, cast

from django.db import connection
from django.db.models import Field, Model

M = TypeVar("M", bound=Model)
Params = Sequence[Any]

# `select_for_update(of=ITS_ROW)` locks the row a query is about, not the rows select_related
# joins to it. Writers then lock in the order they write: a turn's end locking its chat and session
# with the turn took them the other way round from a turn starting (session, then chat), and
# PostgreSQL killed one of the two as a deadlock. On the nullable side of an outer join (a
# sessionless call's turn) PostgreSQL would not lock at all.
ITS_ROW = ("self",)


def table(model: type[Model]) -> str:
    return connection.ops.quote_name(model._meta.db_table)


def column(field: "Field[Any, Any]") -> str:
    """A concrete field's column, quoted."""
    return connection.ops.quote_name(cast(str, field.column))


def concrete_field(model: type[Model], name: str) -> "Field[Any, Any]":
    """`model`'s field `name`, one with a column (a reverse relation has none)."""
    field = model._meta.get_field(name)
    if not isinstance(field, Field):
        raise TypeError(f"{model.__name__}.{name} is a reverse relation: it has no column.")
    return field


def marks(values: Sequence[object]) -> str:
    """One placeholder per value, for `IN (...)` and `VALUES (...)`."""
    return ", ".join(["%s"] * len(values))


def value_reader(field: "Field[Any, Any]", alias: str) -> Callable[[object], Any]:
    """What turns a value of `field`'s column, as the database driver answers it, into the
    field's Python value."""
    column = field.get_col(alias)
    converters = connection.ops.get_db_converters(column) + column.get_db_converters(connection)

    def read(value: object) -> Any:
        for convert in converters:
            value = convert(value, column, connection)
        return value
    return read


class Columns:
    """A model's concrete columns under `alias` in a SELECT (`sql`), but those it is told to
    `leave` (deferred on the instance, as the ORM's `defer`), and the instance made from their
    values (`take`; None when a LEFT JOIN found no row)."""

    def __init__(self, model: type[Model], alias: str, leave: Sequence[str] = ()) -> None:
        self.model = model
        fields = [field for field in model._meta.concrete_fields if field.attname not in leave]
        self.sql = ", ".join(f"{alias}.{column(field)}" for field in fields)
        self.attnames = [field.attname for field in fields]
        self.pk_index = fields.index(model._meta.pk)
        self.readers = [value_reader(field, alias) for field in fields]

    def __len__(self) -> int:
        return len(self.readers)

    def take(self, values: Sequence[Any]) -> Model | None:
        if values[self.pk_index] is None:
            return None
        return self.model.from_db(connection.alias, self.attnames,
                                  [read(value) for read, value in zip(self.readers, values, strict=True)])


def fetch_one(columns: Sequence[Columns], sql: str, params: Params) -> tuple[list[Any], Sequence[Any]] | None:
    """(instances of consecutive `columns`, the values after them) in the row `sql` finds, or
    None when it finds none."""
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        values = cursor.fetchone()
    return None if values is None else take_each(columns, values)


def take_each(columns: Sequence[Columns], values: Sequence[Any]) -> tuple[list[Any], Sequence[Any]]:
    """The instances of consecutive `columns` (Columns) in one row of values, and the values after them."""
    made: list[Any] = []
    start = 0
    for each in columns:
        made.append(each.take(values[start:start + len(each)]))
        start += len(each)
    return made, values[start:]


def insert(*instances: M) -> tuple[M, ...]:
    """Write new instances of one model (their primary keys already set, as a UUID's default sets
    them) in one statement that reads nothing back and sends no signals; answers them. Several
    go as one statement run for each (one round trip on PostgreSQL: psycopg pipelines it)."""
    rows = [_row(instance) for instance in instances]
    with connection.cursor() as cursor:
        if len(rows) == 1:
            cursor.execute(_insert_sql(type(instances[0])), rows[0])
        else:
            cursor.executemany(_insert_sql(type(instances[0])), rows)
    for instance in instances:
        _written(instance)
    return instances


def insert_then(instance: Model, sql: str, params: Params) -> int:
    """Write a new instance (as `insert` does), then run the caller's statement `sql`: on
    PostgreSQL in one statement, the INSERT a CTE of it (a round trip less), elsewhere in two.
    Answers the caller's statement's rowcount."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(f"WITH inserted AS ({_insert_sql(type(instance))}) {sql}", [*_row(instance), *params])
        else:
            cursor.execute(_insert_sql(type(instance)), _row(instance))
            cursor.execute(sql, params)
        count = cursor.rowcount
    _written(instance)
    return count


def _row(instance: Model) -> list[Any]:
    return [field.get_db_prep_save(field.pre_save(instance, True), connection)
            for field in instance._meta.concrete_fields]


def _written(instance: Model) -> None:
    instance._state.adding = False
    instance._state.db = connection.alias


@functools.cache
def _insert_sql(model: type[Model]) -> str:
    fields = model._meta.concrete_fields
    return (f"INSERT INTO {table(model)} ({', '.join(column(f) for f in fields)}) "
            f"VALUES ({marks(fields)})")


def update(instance: Model, *field_names: str) -> None:
    """Write `field_names` of a saved instance in one UPDATE by its primary key, sending no signals."""
    run(*updating(instance, *field_names))


def run(sql: str, params: Params) -> None:
    """Run a statement that answers nothing (a write a caller composed, as `updating` does)."""
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


def updating(instance: Model, *field_names: str) -> tuple[str, list[Any]]:
    """(sql, params) of the UPDATE `update` runs, for the caller to run inside a statement of its
    own (a CTE of it)."""
    fields = [concrete_field(type(instance), name) for name in field_names]
    values = [field.get_db_prep_save(field.pre_save(instance, False), connection) for field in fields]
    return _update_sql(type(instance), tuple(field_names)), [
        *values, instance._meta.pk.get_db_prep_value(instance.pk, connection)]


@functools.cache
def _update_sql(model: type[Model], field_names: tuple[str, ...]) -> str:
    columns = ", ".join(f"{column(concrete_field(model, name))} = %s" for name in field_names)
    return f"UPDATE {table(model)} SET {columns} WHERE {column(model._meta.pk)} = %s"
