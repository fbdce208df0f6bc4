"""Jobs as the lists show them (the jobs page and the API's job list), read lean: the columns the
lists print, their team's, priority class's, accelerator's and submitter's names joined in the
same query, as ``values()`` rows made into `ListedJob` records, never model instances with four
related instances each. A list of any length costs the same few queries (a page's ids, its rows,
and one Redis read for the waits of the pending ones).

A page is picked on the job table alone (its ids: filtered, ordered and sliced), and only its rows
are read with their names (`listed_by_id`). Joined in one statement, the planner may join every
row the filter keeps before it sorts and cuts the page: on a job table not yet analysed after a
burst of submissions, 1,800 rows joined four times for a page of 51, 16 ms a statement.

Each field is the `Job` attribute of the same name (``priority_class_name`` for
``job.priority_class.name`` and so on), so the pages' filters and the estimates read either.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

from django.db import DEFAULT_DB_ALIAS
from django.db.models import QuerySet

from core.compiled_queries import CompiledQuery
from scheduling.models import Job

# Related names, by the field of `ListedJob` that holds them.
_RELATED = {
    "team_name": "team__name",
    "team_slug": "team__slug",
    "priority_class_name": "priority_class__name",
    "accelerator_name": "accelerator_type__name",
    "submitted_by_username": "submitted_by__username",
}


@dataclass(frozen=True, slots=True)
class ListedJob:
    id: int
    name: str
    kind: str
    state: str
    team_id: int
    gpus: int
    min_gpus: int | None
    max_gpus: int | None
    duration_s: float
    time_limit_s: float | None
    checkpoint_interval_s: float | None
    checkpoint_gb: float
    checkpoint_on_preempt: bool
    required_level: str
    preferred_level: str
    submit_s: float
    started_s: float | None
    finished_s: float | None
    placement_level: str
    borrowing: bool
    restarts: int
    command: str
    cluster_account: str
    exit_code: int | None
    created_at: datetime.datetime
    first_estimate_at_s: float | None
    first_estimate_s: float | None
    first_estimate_low_s: float | None
    first_estimate_high_s: float | None
    team_name: str
    team_slug: str
    priority_class_name: str
    accelerator_name: str
    submitted_by_username: str | None

    @property
    def pk(self) -> int:
        return self.id

    def get_state_display(self) -> str:
        return str(Job.State(self.state).label)


LISTED_FIELDS = tuple(field.name for field in fields(ListedJob))
# The ``values()`` names of those fields, in their order.
LISTED_COLUMNS = tuple(_RELATED.get(name, name) for name in LISTED_FIELDS)


def listed_of(**ids: int) -> QuerySet[Job, dict[str, Any]]:
    return Job.objects.filter(pk__in=list(ids.values())).values(*LISTED_COLUMNS)


# A page's rows by their ids: the SQL built once for each length of page (`CompiledQuery`).
_LISTED_BY_LENGTH: dict[int, CompiledQuery] = {}


def listed_query(length: int) -> CompiledQuery:
    """`listed_of` for ``length`` ids, named ``id0``, ``id1``, ..."""
    query = _LISTED_BY_LENGTH.get(length)
    if query is None:
        query = CompiledQuery(listed_of, **{f"id{i}": int for i in range(length)})
        query = _LISTED_BY_LENGTH.setdefault(length, query)
    return query


def listed_by_id(ids: Sequence[int]) -> list[ListedJob]:
    """The jobs ``ids`` names, as records in that order (a job gone since is left out)."""
    if not ids:
        return []
    rows = listed_query(len(ids)).rows(DEFAULT_DB_ALIAS, **{f"id{i}": job_id for i, job_id in enumerate(ids)})
    by_id = {row["id"]: row for row in rows}
    return [ListedJob(*by_id[job_id].values()) for job_id in ids if job_id in by_id]


def listed_from(job: Job) -> ListedJob:
    """The record of a job read as a model instance (with its related rows), as a list reads it."""
    own = {name: getattr(job, name) for name in LISTED_FIELDS if name not in _RELATED}
    return ListedJob(
        **own,
        team_name=job.team.name,
        team_slug=job.team.slug,
        priority_class_name=job.priority_class.name,
        accelerator_name=job.accelerator_type.name,
        submitted_by_username=job.submitted_by.get_username() if job.submitted_by_id and job.submitted_by else None,
    )
