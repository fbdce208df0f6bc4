"""Tables whose rows the tick rewrites leave room in their pages on PostgreSQL, so the updates
stay heap-only (no index entry per update)."""

from __future__ import annotations

import pytest
from django.db import connection


@pytest.mark.parametrize("table", ["scheduling_node", "scheduling_jobusage"])
def test_rows_rewritten_every_tick_leave_half_their_page_free(db: None, table: str) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("a PostgreSQL storage parameter")
    with connection.cursor() as cursor:
        cursor.execute("SELECT reloptions FROM pg_class WHERE relname = %s", [table])
        (options,) = cursor.fetchone()

    assert "fillfactor=50" in (options or [])
