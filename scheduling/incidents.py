"""The incidents page's rows: each incident with the jobs it caught that the reader may see
(their teams' jobs, every job for fleet admins), and how many others' it caught, unnamed, as the
fleet map shows other teams' work."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from django.contrib.auth.models import AnonymousUser, User

from scheduling.models import Incident
from tenants.permissions import is_fleet_admin, member_team_ids


@dataclass(frozen=True, slots=True)
class CaughtJob:
    id: int
    name: str
    gpus: int


@dataclass(frozen=True, slots=True)
class IncidentRow:
    incident: Incident
    jobs: tuple[CaughtJob, ...]  # the reader's to see, by id
    other_jobs: int  # other teams' jobs, counted only
    other_gpus: int


def incident_rows(*, user: User | AnonymousUser, incidents: Iterable[Incident]) -> list[IncidentRow]:
    """``incidents`` (with their jobs prefetched) as rows for ``user``: one query for the user's
    teams besides the user's roles."""
    admin = is_fleet_admin(user)
    own = frozenset() if admin else member_team_ids(user)
    rows = []
    for incident in incidents:
        caught = sorted(incident.jobs.all(), key=lambda job: job.pk)
        shown = [job for job in caught if admin or job.team_id in own]
        hidden = [job for job in caught if not (admin or job.team_id in own)]
        rows.append(
            IncidentRow(
                incident,
                tuple(CaughtJob(job.pk, job.name, job.gpus) for job in shown),
                len(hidden),
                sum(job.gpus for job in hidden),
            )
        )
    return rows
