"""Run as a child process by the tests: take the leader lock, start a tick, and stop in the
middle of writing a gang, after its allocations are inserted but before its nodes are booked.

By default the child dies there at once (no cleanup, like a killed worker). With ``--stall`` it
prints ``mid-tick`` and hangs instead, still holding the lock and its open transaction, until the
test kills it with SIGKILL."""

from __future__ import annotations

import os
import sys
import time
from typing import Any

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
django.setup()

from django.db import connection  # noqa: E402

from scheduling.cycle.leader import cycle_run_as_leader  # noqa: E402

STALL = "--stall" in sys.argv[1:]


def _stop_after_allocations(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
    result = execute(sql, params, many, context)
    if sql.lstrip().upper().startswith("INSERT") and "scheduling_allocation" in sql:
        if not STALL:
            os._exit(9)
        print("mid-tick", flush=True)
        time.sleep(600)
    return result


if __name__ == "__main__":
    with connection.execute_wrapper(_stop_after_allocations):
        cycle_run_as_leader(worker="doomed-worker")
