"""Queries whose SQL is built once per process: `CompiledQuery`.

Building a queryset's SQL (resolving its expressions, joins, subqueries and ordering) is most of
the CPU a simple query costs in Django: 0.3-1.5 ms for each of the queries an API call makes
on every request (the token with its owner and roles, the team, the submission's lookups),
against a few hundredths of a millisecond to send it and read the row. For a given query shape
the SQL is the same every time; only the parameters change.

A `CompiledQuery` keeps the ORM definition as the reference: a function that builds the
``.values(...)`` queryset from keyword arguments. It builds it once per database with a
placeholder for each argument, and keeps the SQL, where each placeholder landed among the
parameters and the converters of the selected columns (what the ORM applies to each value read).
Running it puts the arguments in their places and executes the SQL through the connection's
cursor, so execute wrappers (the query metrics), debug logging and transactions see an ordinary
query, and returns the rows as ``values()`` does. ``tests/test_compiled_queries.py`` holds each
compiled query to its queryset's answer.

The definition must depend on its arguments only (no clock, no settings read while building),
and take each argument as a parameter unchanged: an argument that the ORM transforms (a
``__contains`` pattern, say) or writes into the SQL text is refused when the query is compiled.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models import Model, QuerySet

# Placeholder values by argument type: unlike any value a definition holds as a constant.
_PLACEHOLDER_INT_BASE = -1_987_654_321  # within a 32-bit column: the ORM drops out-of-range lookups
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_PLACEHOLDER_STR = "\x1fcompiled-query-argument-{}\x1f"


@dataclass(frozen=True, slots=True)
class _Compiled:
    sql: str
    params: tuple[Any, ...]
    slots: tuple[tuple[int, str], ...]  # (index among the parameters, argument name)
    names: tuple[str, ...]  # the columns, as ``values()`` names them
    converters: tuple[tuple[int, tuple[Callable[..., Any], ...], Any], ...]  # (column, converters, expression)


class CompiledQuery:
    """``build(**arguments)``'s SQL, built once per database alias and run with other arguments.

    ``arguments`` gives each argument's type (``int`` or ``str``); a value of another type is
    refused when the query runs, as it would otherwise reach the database unconverted. The
    arguments are meant for equality lookups: an ``int`` beyond 64 bits matches no row, as the
    ORM has it (no database column holds one), without a query."""

    def __init__(self, build: Callable[..., QuerySet[Any, Any]], **arguments: type) -> None:
        unsupported = {name: kind for name, kind in arguments.items() if kind not in (int, str)}
        if unsupported:
            raise TypeError(f"Compiled query arguments must be int or str, not {unsupported}.")
        self.build = build
        self.arguments = arguments
        self._compiled: dict[str, _Compiled] = {}
        self._lock = threading.Lock()

    def placeholders(self) -> dict[str, Any]:
        return {
            name: _PLACEHOLDER_INT_BASE - i if kind is int else _PLACEHOLDER_STR.format(name)
            for i, (name, kind) in enumerate(self.arguments.items())
        }

    def compile(self, using: str = DEFAULT_DB_ALIAS) -> _Compiled:
        placeholders = self.placeholders()
        queryset = self.build(**placeholders)
        query = queryset.query
        compiler = query.get_compiler(using)
        sql, params = compiler.as_sql()
        slots = []
        by_value = {value: name for name, value in placeholders.items()}
        for index, param in enumerate(params):
            # The type too: -1987654321 == -1987654321.0, but a float is not the argument.
            if type(param) in (int, str) and param in by_value:
                slots.append((index, by_value[param]))
        missing = set(placeholders) - {name for _, name in slots}
        inlined = [name for name, value in placeholders.items() if str(value) in sql]
        if missing or inlined:
            raise ValueError(
                f"Compiled query {self.build.__qualname__}: arguments {sorted(missing | set(inlined))} do not "
                "reach the database as parameters of their own."
            )
        if query.selected:
            names = tuple(query.selected)
        else:
            names = (*query.extra_select, *query.values_select, *query.annotation_select)
        fields = [column[0] for column in compiler.select[: compiler.col_count]]
        converters = tuple(
            (position, tuple(convs), expression)
            for position, (convs, expression) in compiler.get_converters(fields).items()
        )
        return _Compiled(sql=sql, params=tuple(params), slots=tuple(slots), names=names, converters=converters)

    def _for(self, using: str) -> _Compiled:
        compiled = self._compiled.get(using)
        if compiled is None:
            with self._lock:
                compiled = self._compiled.get(using) or self.compile(using)
                self._compiled[using] = compiled
        return compiled

    def rows(self, using: str = DEFAULT_DB_ALIAS, **arguments: Any) -> list[dict[str, Any]]:
        """The rows ``build(**arguments)`` would give, as ``values()`` dicts."""
        if arguments.keys() != self.arguments.keys():
            raise TypeError(f"Compiled query {self.build.__qualname__} takes {sorted(self.arguments)}.")
        for name, kind in self.arguments.items():
            value = arguments[name]
            if not isinstance(value, kind) or isinstance(value, bool):
                raise TypeError(f"Compiled query argument {name} must be {kind.__name__}, not {value!r}.")
            if isinstance(value, int) and not _INT64_MIN <= value <= _INT64_MAX:
                return []
        compiled = self._for(using)
        params = list(compiled.params)
        for index, name in compiled.slots:
            params[index] = arguments[name]
        connection = connections[using]
        with connection.cursor() as cursor:
            cursor.execute(compiled.sql, params)
            fetched = cursor.fetchall()
        width = len(compiled.names)
        result = []
        for fetched_row in fetched:
            row = list(fetched_row[:width])
            for position, convs, expression in compiled.converters:
                value = row[position]
                for converter in convs:
                    value = converter(value, expression, connection)
                row[position] = value
            result.append(dict(zip(compiled.names, row, strict=True)))
        return result

    def first(self, using: str = DEFAULT_DB_ALIAS, **arguments: Any) -> dict[str, Any] | None:
        rows = self.rows(using, **arguments)
        return rows[0] if rows else None


def attnames(model: type[Model], prefix: str = "") -> list[str]:
    """The names ``values()`` takes for ``model``'s concrete columns (``prefix`` for a related
    model's: ``"user__"``)."""
    return [prefix + field.attname for field in model._meta.concrete_fields]


def instance_from(model: type[Model], row: dict[str, Any], *, prefix: str = "", using: str = DEFAULT_DB_ALIAS) -> Any:
    """The model instance a query would have made from the ``attnames(model, prefix)`` columns
    of ``row`` (as ``Model.from_db`` makes it: saved, on ``using``)."""
    fields = model._meta.concrete_fields
    return model.from_db(using, [field.attname for field in fields], [row[prefix + field.attname] for field in fields])


@dataclass(frozen=True, slots=True)
class _CompiledInsert:
    sql: str
    fields: tuple[Any, ...]  # the model's fields, in the order of the statement's parameters
    returning: tuple[Any, ...]  # the fields the statement returns (the primary key)
    returning_params: tuple[Any, ...]
    converters: tuple[tuple[int, tuple[Callable[..., Any], ...], Any], ...]


class CompiledInsert:
    """``Model.objects.create(...)`` for one model as one ``INSERT ... RETURNING``, its SQL built
    once per database instead of on each insert.

    The reference is ``instance.save(force_insert=True)``, which `insert` falls back to whenever
    the two could differ: a backend that cannot return columns from an insert, a value that is an
    expression (``F()``, a database function), a field with a placeholder of its own, a model
    with a parent table or ordered with respect to another, or anyone listening to the model's
    ``pre_save`` or ``post_save`` signals. Otherwise the row's values go through the same
    ``pre_save`` and ``get_db_prep_save`` calls as Django's insert, and the returned primary key
    through the same converters."""

    def __init__(self, model: type[Model]) -> None:
        self.model = model
        self._compiled: dict[str, _CompiledInsert | None] = {}
        self._lock = threading.Lock()

    def fields(self) -> list[Any]:
        meta = self.model._meta
        return [f for f in meta.local_concrete_fields if not f.generated and f is not meta.auto_field]

    def compile(self, using: str) -> _CompiledInsert | None:
        """The statement, or None where this backend or model needs Django's own save."""
        from django.db.models.sql import InsertQuery

        connection = connections[using]
        meta = self.model._meta
        fields = self.fields()
        if (
            not connection.features.can_return_columns_from_insert
            or meta.parents
            or meta.order_with_respect_to
            or meta.auto_field is None
            or any(hasattr(field, "get_placeholder") for field in fields)
        ):
            return None
        query = InsertQuery(self.model)
        query.insert_values(fields, [self.model()], raw=True)  # raw: the values as they are, unconverted
        compiler = query.get_compiler(using)
        compiler.returning_fields = meta.db_returning_fields
        statements = compiler.as_sql()
        if len(statements) != 1:
            return None
        sql, params = statements[0]
        if len(params) != len(fields):
            return None
        columns = [field.get_col(meta.db_table) for field in meta.db_returning_fields]
        converters = tuple(
            (position, tuple(convs), expression)
            for position, (convs, expression) in compiler.get_converters(columns).items()
        )
        return _CompiledInsert(
            sql=sql,
            fields=tuple(fields),
            returning=tuple(meta.db_returning_fields),
            returning_params=tuple(compiler.returning_params),
            converters=converters,
        )

    def _for(self, using: str) -> _CompiledInsert | None:
        if using not in self._compiled:
            with self._lock:
                if using not in self._compiled:
                    self._compiled[using] = self.compile(using)
        return self._compiled[using]

    def create(self, using: str = DEFAULT_DB_ALIAS, **values: Any) -> Any:
        """``Model.objects.create(**values)``: the saved instance, its primary key set."""
        from django.db import transaction
        from django.db.models.signals import post_save, pre_save

        instance: Any = self.model(**values)
        compiled = self._for(using)
        if (
            compiled is None
            or pre_save.has_listeners(self.model)
            or post_save.has_listeners(self.model)
            or instance._is_pk_set()
        ):
            instance.save(force_insert=True, using=using)
            return instance
        instance._prepare_related_fields_for_save(operation_name="save")
        connection = connections[using]
        params = []
        for field in compiled.fields:
            value = field.pre_save(instance, True)
            if hasattr(value, "resolve_expression"):
                instance.save(force_insert=True, using=using)
                return instance
            params.append(field.get_db_prep_save(value, connection))
        with transaction.mark_for_rollback_on_error(using=using), connection.cursor() as cursor:
            cursor.execute(compiled.sql, params)
            operations: Any = connection.ops
            row = list(operations.fetch_returned_insert_columns(cursor, compiled.returning_params))
        for position, convs, expression in compiled.converters:
            for converter in convs:
                row[position] = converter(row[position], expression, connection)
        for value, field in zip(row, compiled.returning, strict=True):
            setattr(instance, field.attname, value)
        instance._state.db = using
        instance._state.adding = False
        return instance
