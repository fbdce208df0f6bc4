"""The one seam through which services queue Celery tasks: by the task's registered name
(``"finance.tasks.report_export_build"``), so an app's `tasks` module imports its services and no
service imports a `tasks` module back. The name is the one Celery routes by and stores in the
broker's messages; the task runs as ``.delay`` would run it (eagerly too, when so configured)."""

from __future__ import annotations

import importlib
from functools import partial
from typing import Any

from celery import current_app
from django.db import transaction


def enqueue(task_name: str, /, **kwargs: Any) -> None:
    """Queue the task named `task_name` now, with `kwargs`."""
    # A process that never imported the task's module (a web worker) registers it here.
    importlib.import_module(task_name.rpartition(".")[0])
    current_app.tasks[task_name].delay(**kwargs)


def enqueue_on_commit(task_name: str, /, *, robust: bool = True, **kwargs: Any) -> None:
    """Queue the task once the current transaction commits (nothing when it rolls back). Robust by
    default: a broker outage is logged and the change still stands."""
    transaction.on_commit(partial(enqueue, task_name, **kwargs), robust=robust)
