"""The ``simulations`` queue (`CELERY_TASK_ROUTES`): one replay per task, so a long replay never
holds the cycle back."""

from __future__ import annotations

import math

from celery import shared_task
from django.conf import settings

from simulations.services import simulation_run


# The replay stops itself at SIMULATION_MAX_WALL_S between two of its cycles; the hard limit is
# the backstop for a pool that enforces it (prefork), should one cycle never return. Celery takes
# whole seconds.
@shared_task(time_limit=math.ceil(settings.SIMULATION_MAX_WALL_S) + 120)
def simulation_run_task(simulation_id: int) -> str | None:
    return simulation_run(simulation_id=simulation_id)
