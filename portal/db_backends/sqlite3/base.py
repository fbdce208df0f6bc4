"""SQLite, counting queries for /metrics through one cursor class per process."""

from __future__ import annotations

from typing import Any

from django.db.backends.sqlite3 import base
from django_prometheus.db.common import DatabaseWrapperMixin

from portal.db_backends import counting_cursor_class


class DatabaseWrapper(DatabaseWrapperMixin, base.DatabaseWrapper):
    def create_cursor(self, name: str | None = None) -> Any:
        cursor_class = counting_cursor_class(base.SQLiteCursorWrapper, self.alias, self.vendor)
        return self.connection.cursor(factory=cursor_class)
