"""Update many rows of one table in one statement each batch, every row with its own values.

``rows_update`` joins the table to a list of rows given as ``VALUES``::

    WITH v (m_id, m_state, m_version, s_started_s, a_version) AS (VALUES (...), (...), ...)
    UPDATE scheduling_job SET started_s = v.s_started_s, version = version + v.a_version
    FROM v WHERE id = v.m_id AND state = v.m_state AND version = v.m_version
    RETURNING id

Each row is updated only where every ``match`` column equals the row's value (a guarded update:
the expected state and version), and the ids of the rows updated are returned, so the caller
knows which guards held. The same statement runs on PostgreSQL and on SQLite 3.35+ (UPDATE ...
FROM and RETURNING); ``rows_update_supported`` says whether this database has them.

It is what ``Model.objects.filter(pk=id, state=..., version=...).update(...)`` does for one row,
for a thousand rows per round trip.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from typing import Any

from django.db import connection
from django.db.models import Model

# Rows per statement: a bounded statement text, and a round trip per thousand rows.
ROWS_PER_STATEMENT = 1000


def rows_update_supported() -> bool:
    if connection.vendor == "postgresql":
        return True
    return connection.vendor == "sqlite" and sqlite3.sqlite_version_info >= (3, 35)


def _batches(rows: Sequence[tuple[Any, ...]], columns: int) -> Iterator[Sequence[tuple[Any, ...]]]:
    limit = connection.features.max_query_params
    size = ROWS_PER_STATEMENT if limit is None else max(1, min(ROWS_PER_STATEMENT, limit // columns))
    for start in range(0, len(rows), size):
        yield rows[start : start + size]


def rows_update(
    model: type[Model],
    *,
    match: Sequence[str],
    assign: Sequence[str] = (),
    add: Sequence[str] = (),
    rows: Sequence[tuple[Any, ...]],
) -> set[int]:
    """For each row ``(*match values, *assign values, *add values)``: where the row's ``match``
    columns hold those values, set each ``assign`` column to its value and add each ``add``
    value to its column. Returns the primary keys of the rows updated."""
    if not rows:
        return set()
    meta = model._meta
    quote = connection.ops.quote_name
    table = quote(meta.db_table)
    names = [*(f"m_{c}" for c in match), *(f"s_{c}" for c in assign), *(f"a_{c}" for c in add)]
    columns = [*match, *assign, *add]
    # Types from the first row's casts: a column of NULLs or of bare literals is typed by them.
    casts = [f"CAST(%s AS {meta.get_field(c).cast_db_type(connection)})" for c in columns]
    first_row = f"({', '.join(casts)})"
    other_row = f"({', '.join(['%s'] * len(columns))})"
    settings = [f"{quote(c)} = v.{quote(f's_{c}')}" for c in assign] + [
        f"{quote(c)} = {quote(c)} + v.{quote(f'a_{c}')}" for c in add
    ]
    guard = " AND ".join(f"{quote(c)} = v.{quote(f'm_{c}')}" for c in match)
    pk = quote(meta.pk.column)
    updated: set[int] = set()
    with connection.cursor() as cursor:
        for batch in _batches(rows, len(columns)):
            values = ", ".join([first_row, *([other_row] * (len(batch) - 1))])
            cursor.execute(
                f"WITH v ({', '.join(quote(n) for n in names)}) AS (VALUES {values}) "
                f"UPDATE {table} SET {', '.join(settings)} FROM v WHERE {guard} RETURNING {pk}",
                [value for row in batch for value in row],
            )
            updated.update(pk_value for (pk_value,) in cursor.fetchall())
    return updated
