"""Run as a child process by the tests: take the leader lock, start a tick, and die hard (no
cleanup, like a killed worker) in the middle of writing a gang, after its allocations are
inserted but before its nodes are booked."""

from __future__ import annotations

import os
from typing import Any

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
django.setup()

from django.db import connection  # noqa: E402

from scheduling.services.leader import cycle_run_as_leader  # noqa: E402


def _die_after_allocations(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
    result = execute(sql, params, many, context)
    if sql.lstrip().upper().startswith("INSERT") and "scheduling_allocation" in sql:
        os._exit(9)
    return result


if __name__ == "__main__":
    with connection.execute_wrapper(_die_after_allocations):
        cycle_run_as_leader()
