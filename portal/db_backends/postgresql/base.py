"""PostgreSQL, counting queries for /metrics through one cursor class per process."""

from __future__ import annotations

from typing import Any

from django.db.backends.postgresql import base
from django_prometheus.db.common import DatabaseWrapperMixin

from portal.db_backends import counting_cursor_class


class DatabaseWrapper(DatabaseWrapperMixin, base.DatabaseWrapper):
    def get_connection_params(self) -> dict[str, Any]:
        params = super().get_connection_params()
        params["cursor_factory"] = counting_cursor_class(params["cursor_factory"], self.alias, self.vendor)
        return params

    def create_cursor(self, name: str | None = None) -> Any:
        # psycopg already makes counting cursors (cursor_factory above); the mixin's own
        # create_cursor is for the SQLite wrapper's interface.
        return base.DatabaseWrapper.create_cursor(self, name=name)
