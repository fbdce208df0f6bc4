"""Django's PostgreSQL and SQLite backends counting queries for /metrics, as django-prometheus's do,
with the counting cursor class made once per process instead of once per connection or cursor.

django-prometheus builds a new cursor class (``ExportingCursorWrapper``) each time a connection is
made (PostgreSQL) or a cursor is opened (SQLite). Under ASGI every request has a backend and a
connection of its own (taken from the pool), so that was a class per request: its creation, and
the garbage cycles of a class, were a measurable share of an API call."""

from __future__ import annotations

import functools

from django_prometheus.db.common import ExportingCursorWrapper


@functools.cache
def counting_cursor_class(cursor_class: type, alias: str, vendor: str) -> type:
    """django-prometheus's counting subclass of ``cursor_class``, one per class, alias and vendor."""
    return ExportingCursorWrapper(cursor_class, alias, vendor)
