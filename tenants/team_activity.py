"""What the team pages show of a team's work on the fleet (its queue, its GPUs in use over the last
fleet day, its fair-share standing), asked through one small interface.

Tenants (departments, teams, people, quotas, priority classes, policy, the audit log) sits below
scheduling: scheduling imports tenants, and tenants imports nothing of scheduling but the pure
engine's declarations and the bounds on numbers (`scheduling.limits`); the hardware that quotas
are counted in is the fleet app's, below both. The team pages still show the scheduler's view of
a team (what it runs, borrows and lends now, its queue): scheduling provides it when the apps are
loaded (`scheduling.apps.SchedulingConfig.ready`); `tests/test_layers.py` keeps the direction.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from django.core.exceptions import ImproperlyConfigured
from django.db.models import QuerySet

from tenants.models import Team
from tenants.selectors import QuotaRow


class TeamActivity(Protocol):
    def overview_rows(self, *, teams: QuerySet[Team]) -> Sequence[object]:
        """One row per team of ``teams`` (already scoped to the viewer), by name, for the team
        list: ``team``, ``guaranteed_gpus``, ``in_use_gpus``, ``pending_jobs``, ``pending_gpus``."""
        ...

    def quota_overview(self, *, team: Team) -> list[QuotaRow]:
        """One row per accelerator type with the team's quota and what it uses, borrows and lends
        right now (from its running jobs)."""
        ...

    def page_context(self, *, team: Team) -> Mapping[str, object]:
        """The team page's part from the scheduler: ``now_s``, ``pending_jobs`` (rows with
        ``job``, and ``why`` it waits and when it ``starts`` in words), ``usage_chart``,
        ``usage_summary`` and ``standing``."""
        ...


_provided: list[TeamActivity] = []


def team_activity_provide(activity: TeamActivity) -> None:
    """Called once, by the app that schedules the teams' jobs, when it is ready."""
    _provided[:] = [activity]


def team_activity() -> TeamActivity:
    if not _provided:
        raise ImproperlyConfigured("No team activity is provided: is the scheduling app installed?")
    return _provided[0]
