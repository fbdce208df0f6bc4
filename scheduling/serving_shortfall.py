"""Why serving falls short of its objective now: the replicas that wait, per deployment, with the
scheduler's reason and, for the quota that holds them, the team's limits and use. The dashboard
names it under the attainment figure; fleet admins also see the quota's numbers and the team.

A reader who is neither a fleet admin nor in the deployment's team reads the cause without the
team's or the deployment's name, as the dashboard shows other teams' work merged."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import QuerySet, Sum

from core.compiled_queries import CompiledQuery
from scheduling.engine.vocabulary import REASON_GUARANTEE, REASON_POOL, REASON_QUOTA, reason_text
from scheduling.live.waits import job_waits_for
from scheduling.models import Allocation, Job
from tenants.models import Quota
from tenants.permissions import is_fleet_admin, member_team_ids

QUOTA_REASONS = (REASON_QUOTA, REASON_GUARANTEE, REASON_POOL)


@dataclass(frozen=True, slots=True)
class QuotaFigures:
    """The team's quota on the replicas' accelerator, for fleet admins: what holds the replicas."""

    guaranteed: int
    borrow_limit: int | None  # None: unlimited
    in_use: int


@dataclass(frozen=True, slots=True)
class BlockedServing:
    deployment: str | None  # None: not the reader's to name
    team: str | None
    team_slug: str | None
    accelerator: str
    replicas: int
    gpus: int
    reason: str  # the scheduler's reason code for the replicas (the most common one)
    quota: QuotaFigures | None  # fleet admins only, when a quota holds them

    @property
    def reason_words(self) -> str:
        return reason_text(self.reason)


_WAITING_FIELDS = (
    *("id", "gpus", "deployment__name", "team_id", "team__name", "team__slug"),
    *("accelerator_type_id", "accelerator_type__name"),
)


def waiting_replicas() -> QuerySet[Job, dict[str, Any]]:
    return Job.objects.filter(deployment__isnull=False, state=Job.State.PENDING).order_by("id").values(*_WAITING_FIELDS)


# The dashboard asks it on each request: its SQL is built once (`CompiledQuery`), not on each.
WAITING_REPLICAS = CompiledQuery(waiting_replicas)


def serving_blocked(*, user: User | AnonymousUser) -> list[BlockedServing]:
    """Every deployment with replicas waiting now, most GPUs first. A few queries."""
    admin = is_fleet_admin(user)
    own = frozenset() if admin else member_team_ids(user)
    waiting = [tuple(row.values()) for row in WAITING_REPLICAS.rows()]
    if not waiting:
        return []
    waits = job_waits_for(job_ids=[row[0] for row in waiting])
    groups: dict[tuple[str, int, int], list[tuple[int, int, str]]] = defaultdict(list)
    names: dict[tuple[str, int, int], tuple[str, str, str]] = {}
    for job_id, gpus, deployment, team_id, team, slug, accelerator_id, accelerator in waiting:
        key = (deployment, team_id, accelerator_id)
        groups[key].append((job_id, gpus, waits[job_id].reason))
        names[key] = (team, slug, accelerator)
    blocked = []
    for (deployment, team_id, accelerator_id), replicas in groups.items():
        reasons = [reason for _, _, reason in replicas]
        reason = max(set(reasons), key=lambda code: (reasons.count(code), code))
        team, slug, accelerator = names[(deployment, team_id, accelerator_id)]
        named = admin or team_id in own
        blocked.append(
            BlockedServing(
                deployment if named else None,
                team if named else None,
                slug if named else None,
                accelerator,
                len(replicas),
                sum(gpus for _, gpus, _ in replicas),
                reason,
                _quota(team_id, accelerator_id) if admin and reason in QUOTA_REASONS else None,
            )
        )
    return sorted(blocked, key=lambda b: (-b.gpus, b.deployment or "", b.accelerator))


def _quota(team_id: int, accelerator_id: int) -> QuotaFigures:
    quota = Quota.objects.filter(team_id=team_id, accelerator_type_id=accelerator_id).first()
    in_use = (
        Allocation.objects.filter(
            job__team_id=team_id, job__accelerator_type_id=accelerator_id, job__state=Job.State.RUNNING
        ).aggregate(total=Sum("gpus"))["total"]
        or 0
    )
    if quota is None:
        return QuotaFigures(0, 0, in_use)
    return QuotaFigures(quota.guaranteed, quota.borrow_limit, in_use)
