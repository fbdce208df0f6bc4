"""Update or insert many rows of one table in a statement, every row with its own values.

``rows_update`` is what ``Model.objects.filter(pk=id, state=..., version=...).update(...)`` does
for one row, for all of them at once: it joins the table to the rows::

    UPDATE scheduling_job SET started_s = v.s_started_s, version = version + v.a_version
    FROM <rows> AS v (m_id, m_state, m_version, s_started_s, a_version)
    WHERE id = v.m_id AND state = v.m_state AND version = v.m_version
    RETURNING id

Each row is updated only where every ``match`` column equals the row's value (a guarded update:
the expected state and version), and the ids of the rows updated are returned, so the caller
knows which guards held. On PostgreSQL ``<rows>`` is ``unnest`` of one array per column, so the
statement's text is the same whatever the number of rows; elsewhere it is a ``VALUES`` list, a
thousand rows per statement (SQLite 3.35+ has UPDATE ... FROM and RETURNING;
``rows_update_supported`` says whether this database has them).

``by_ids`` narrows a query to many ids the same way: one statement with one array on PostgreSQL,
a thousand ids per statement elsewhere.

``rows_insert`` inserts rows the same way (``INSERT ... SELECT FROM unnest`` on PostgreSQL, a
prepared statement run per row elsewhere), without building model instances.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.db.models import Field, Model, QuerySet
from django.db.models.expressions import RawSQL

# Rows per statement where rows are spelled out as VALUES: a bounded text and parameter count.
ROWS_PER_STATEMENT = 1000

Row = tuple[Any, ...]


def rows_update_supported() -> bool:
    if connection.vendor == "postgresql":
        return True
    return connection.vendor == "sqlite" and sqlite3.sqlite_version_info >= (3, 35)


def _column(model: type[Model], name: str) -> Field[Any, Any]:
    """The field behind one of ``model``'s own columns (a reverse relation has none here)."""
    field = model._meta.get_field(name)
    if not isinstance(field, Field) or field.column is None:
        raise ValueError(f"{model.__name__}.{name} is not a column of its table")
    return field


def _column_name(field: Field[Any, Any] | None) -> str:
    if field is None or field.column is None:
        raise ValueError(f"{field} has no column of its own")
    return field.column


# Columns whose values the database drivers take as they are.
_AS_THEY_ARE = {"BooleanField", "CharField", "TextField", "ForeignKey", "AutoField", "BigAutoField"}


def _preparer(field: Field[Any, Any]) -> Callable[[Any], Any]:
    """How a column's values are handed to the driver: numbers, text and booleans as they are,
    but a float column's values as floats (PostgreSQL's arrays take no mix of ints and floats),
    and anything else (dates, times) prepared as the ORM prepares it."""
    kind = field.get_internal_type()
    if kind == "FloatField":
        return lambda value: value if value is None else float(value)
    if kind in _AS_THEY_ARE or kind.endswith("IntegerField"):
        return lambda value: value
    database = connections[DEFAULT_DB_ALIAS]
    return lambda value: field.get_db_prep_save(value, database)


def _prepared(model: type[Model], columns: Sequence[str], rows: Sequence[Row]) -> list[list[Any]]:
    """The rows' values as the database takes them, column by column."""
    preparers = [_preparer(_column(model, c)) for c in columns]
    return [[prepare(row[i]) for row in rows] for i, prepare in enumerate(preparers)]


# PostgreSQL number types whose values `pg_array` spells with `repr` (text is quoted).
_INTEGERS = {"smallint", "integer", "bigint"}
_FLOATS = {"real", "double precision"}


def pg_array(values: Sequence[Any], db_type: str) -> Any:
    """A column of values as PostgreSQL takes it for ``%s::<db_type>[]``: numbers and text as one
    array literal, numbers spelled in C by ``repr`` (the shortest text that reads back as the same
    float), text quoted with its quotes and backslashes escaped (a seventh to a third of the CPU of
    handing the driver a list to adapt one value at a time, at tens of thousands of rows a tick);
    other values as a list."""
    if db_type == "text" or db_type.startswith("varchar"):
        return "{" + ",".join("NULL" if value is None else _quoted(value) for value in values) + "}"
    if db_type not in _INTEGERS and db_type not in _FLOATS:
        return list(values)
    if None in values:
        spelled = ",".join("NULL" if value is None else repr(value) for value in values)
    else:
        spelled = ",".join(map(repr, map(int, values) if db_type in _INTEGERS else map(float, values)))
    return "{" + spelled + "}"


def _quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _pg_arrays(model: type[Model], columns: Sequence[str], rows: Sequence[Row], types: Sequence[str]) -> list[Any]:
    return [pg_array(column, t) for column, t in zip(_prepared(model, columns, rows), types, strict=True)]


def _db_types(model: type[Model], columns: Sequence[str]) -> list[str]:
    types = []
    for name in columns:
        kind = _column(model, name).cast_db_type(connection)
        if kind is None:
            raise ValueError(f"{model.__name__}.{name} has no database type to cast to")
        types.append(kind)
    return types


def _batches(rows: Sequence[Row], columns: int) -> Iterator[Sequence[Row]]:
    limit = connection.features.max_query_params
    size = ROWS_PER_STATEMENT if limit is None else max(1, min(ROWS_PER_STATEMENT, limit // columns))
    for start in range(0, len(rows), size):
        yield rows[start : start + size]


def by_ids(queryset: QuerySet[Any, Any], ids: Sequence[int], *, field: str = "pk") -> Iterator[QuerySet[Any, Any]]:
    """``queryset`` narrowed to the rows whose ``field`` is one of ``ids``, as the querysets to run:
    one on PostgreSQL, whatever the number of ids (``field IN (SELECT unnest(ids))``: a text and a
    plan that do not grow with them, where a thousand ids per statement made the planner scan the
    table once per thousand), else one per thousand ids (SQLite's bound on parameters)."""
    if not ids:
        return
    if connection.vendor == "postgresql":
        yield queryset.filter(**{f"{field}__in": RawSQL("SELECT unnest(%s::bigint[])", (list(ids),))})
        return
    for start in range(0, len(ids), ROWS_PER_STATEMENT):
        yield queryset.filter(**{f"{field}__in": ids[start : start + ROWS_PER_STATEMENT]})


def rows_update(
    model: type[Model],
    *,
    match: Sequence[str],
    assign: Sequence[str] = (),
    add: Sequence[str] = (),
    rows: Sequence[Row],
) -> set[int]:
    """For each row ``(*match values, *assign values, *add values)``: where the row's ``match``
    columns hold those values, set each ``assign`` column to its value and add each ``add``
    value to its column. Returns the primary keys of the rows updated."""
    if not rows:
        return set()
    quote = connection.ops.quote_name
    table = quote(model._meta.db_table)
    columns = [*match, *assign, *add]
    aliases = ", ".join(quote(n) for n in [*(f"m_{c}" for c in match), *(f"s_{c}" for c in assign)])
    aliases += "".join(f", {quote(f'a_{c}')}" for c in add)
    settings = [f"{quote(c)} = v.{quote(f's_{c}')}" for c in assign] + [
        f"{quote(c)} = {quote(c)} + v.{quote(f'a_{c}')}" for c in add
    ]
    head = f"UPDATE {table} SET {', '.join(settings)} FROM "
    guard = " AND ".join(f"{quote(c)} = v.{quote(f'm_{c}')}" for c in match)
    tail = f" WHERE {guard} RETURNING {quote(_column_name(model._meta.pk))}"
    types = _db_types(model, columns)
    updated: set[int] = set()
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            arrays = ", ".join(f"%s::{t}[]" for t in types)
            cursor.execute(f"{head}unnest({arrays}) AS v ({aliases}){tail}", _pg_arrays(model, columns, rows, types))
            return {pk for (pk,) in cursor.fetchall()}
        # Types from the first row's casts: a column of NULLs or of bare literals is typed by them.
        first_row = "(" + ", ".join(f"CAST(%s AS {t})" for t in types) + ")"
        other_row = "(" + ", ".join(["%s"] * len(columns)) + ")"
        for batch in _batches(rows, len(columns)):
            values = ", ".join([first_row, *([other_row] * (len(batch) - 1))])
            prepared = _prepared(model, columns, batch)
            cursor.execute(
                f"WITH v ({aliases}) AS (VALUES {values}) {head}v{tail}",
                [column[i] for i in range(len(batch)) for column in prepared],
            )
            updated.update(pk for (pk,) in cursor.fetchall())
    return updated


def rows_insert(model: type[Model], *, columns: Sequence[str], rows: Sequence[Row]) -> None:
    """Insert ``rows`` (one value per column each) into ``model``'s table."""
    if not rows:
        return
    quote = connection.ops.quote_name
    names = ", ".join(quote(_column_name(_column(model, c))) for c in columns)
    head = f"INSERT INTO {quote(model._meta.db_table)} ({names}) "
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            types = _db_types(model, columns)
            arrays = ", ".join(f"%s::{t}[]" for t in types)
            cursor.execute(f"{head}SELECT * FROM unnest({arrays})", _pg_arrays(model, columns, rows, types))
            return
        prepared = _prepared(model, columns, rows)
        cursor.executemany(f"{head}VALUES ({', '.join(['%s'] * len(columns))})", list(zip(*prepared, strict=True)))
