"""Read-side queries for the fleet and its jobs. Job selectors are scoped by ``user=``."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Count, F, QuerySet, Sum
from django.http import Http404

from scheduling.fleet_calendar import fleet_epoch, fleet_seconds
from scheduling.models import Allocation, FleetSample, Job, Node, Pod, Rack, SchedulerEvent, UsageSample
from scheduling.services.pending import pending_info_for
from tenants.models import Membership, Team
from tenants.permissions import is_fleet_admin
from tenants.selectors import quota_overview_for_team

AnyUser = AbstractBaseUser | AnonymousUser


@dataclass(frozen=True, slots=True)
class FleetSummary:
    pods: int
    racks: int
    nodes: int
    gpus: int
    healthy_gpus: int
    nodes_up: int


def fleet_summary() -> FleetSummary:
    """Size and health of the whole fleet, in four queries."""
    totals = Node.objects.aggregate(nodes=Count("id"), gpus=Sum("gpus"), healthy_gpus=Sum("healthy_gpus"))
    return FleetSummary(
        pods=Pod.objects.count(),
        racks=Rack.objects.count(),
        nodes=totals["nodes"] or 0,
        gpus=totals["gpus"] or 0,
        healthy_gpus=totals["healthy_gpus"] or 0,
        nodes_up=Node.objects.filter(state=Node.State.UP).count(),
    )


def jobs_for_user(*, user: AnyUser, states: tuple[str, ...] | None = None) -> QuerySet[Job]:
    """Jobs the user may see: their teams' jobs, or every job for fleet admins."""
    jobs = Job.objects.select_related("team", "accelerator_type", "priority_class")
    if not is_fleet_admin(user):
        jobs = jobs.filter(team__in=Membership.objects.filter(user_id=user.pk).values("team_id"))
    if states:
        jobs = jobs.filter(state__in=states)
    return jobs


def job_for_user(*, user: AnyUser, job_id: int) -> Job:
    job = jobs_for_user(user=user).filter(pk=job_id).first()
    if job is None:
        raise Http404("No such job.")
    return job


def pending_jobs_for_team(*, team: Team, limit: int = 50) -> list[Job]:
    """The team's queued jobs, oldest first, each with ``.pending``: why it waits and when it
    should start, as the latest cycle saw it."""
    jobs = list(
        Job.objects.filter(team=team, state=Job.State.PENDING)
        .select_related("accelerator_type", "priority_class")
        .order_by("submit_s", "id")[:limit]
    )
    info = pending_info_for(job_ids=[job.pk for job in jobs])
    for job in jobs:
        job.pending = info[job.pk]
    return jobs


def job_events(*, job: Job, limit: int = 200) -> list[SchedulerEvent]:
    return list(SchedulerEvent.objects.filter(job=job).order_by("-id")[:limit])


def job_nodes(*, job: Job) -> list[tuple[str, int]]:
    return list(Allocation.objects.filter(job=job).order_by("node__name").values_list("node__name", "gpus"))


def fleet_samples_recent(*, limit: int = 300) -> list[FleetSample]:
    """The newest ``limit`` fleet samples, oldest first, for the live charts."""
    return list(reversed(FleetSample.objects.order_by("-id")[:limit]))


@dataclass
class NodeCell:
    id: int
    name: str
    accelerator: str
    gpus: int
    healthy_gpus: int
    allocated_gpus: int
    state: str
    jobs: list[str] = field(default_factory=list)


@dataclass
class RackColumn:
    name: str
    nodes: list[NodeCell] = field(default_factory=list)


@dataclass
class PodBlock:
    name: str
    racks: list[RackColumn] = field(default_factory=list)


OTHER_TEAMS_JOB = "another team's job"


def fleet_map(*, user: AnyUser) -> list[PodBlock]:
    """Pods -> racks -> nodes with occupancy and the jobs on each node, in three queries besides
    the user's roles. Job names show for the user's own teams' jobs (every job for fleet admins);
    any other job shows only as another team's, with its GPU count."""
    admin = is_fleet_admin(user)
    own_teams: set[int] = set()
    if not admin:
        own_teams = set(Membership.objects.filter(user_id=user.pk).values_list("team_id", flat=True))
    jobs_on: dict[int, list[str]] = {}
    for node_id, name, team_id, gpus in Allocation.objects.order_by("job_id").values_list(
        "node_id", "job__name", "job__team_id", "gpus"
    ):
        label = name if admin or team_id in own_teams else OTHER_TEAMS_JOB
        jobs_on.setdefault(node_id, []).append(f"{label} ({gpus})")
    pods: dict[str, PodBlock] = {}
    racks: dict[str, RackColumn] = {}
    for row in Node.objects.order_by("rack__pod__name", "rack__name", "name").values(
        "id",
        "name",
        "rack__name",
        "rack__pod__name",
        "accelerator_type__name",
        "gpus",
        "healthy_gpus",
        "allocated_gpus",
        "state",
    ):
        pod = pods.setdefault(row["rack__pod__name"], PodBlock(row["rack__pod__name"]))
        if row["rack__name"] not in racks:
            racks[row["rack__name"]] = RackColumn(row["rack__name"])
            pod.racks.append(racks[row["rack__name"]])
        racks[row["rack__name"]].nodes.append(
            NodeCell(
                row["id"],
                row["name"],
                row["accelerator_type__name"],
                row["gpus"],
                row["healthy_gpus"],
                row["allocated_gpus"],
                row["state"],
                jobs_on.get(row["id"], []),
            )
        )
    return list(pods.values())


@dataclass(frozen=True, slots=True)
class UsageRow:
    """One team's use of one accelerator type for one job kind over a report period."""

    team: str
    department: str
    accelerator: str
    kind: str
    allocated_gpu_h: float
    useful_gpu_h: float
    lost_gpu_h: float
    borrowed_gpu_h: float


@dataclass(frozen=True, slots=True)
class FleetTotals:
    capacity_gpu_h: float
    allocated_gpu_h: float
    idle_gpu_h: float
    down_gpu_h: float

    @property
    def utilisation(self) -> float:
        return self.allocated_gpu_h / self.capacity_gpu_h if self.capacity_gpu_h else 0.0


def usage_report(*, start: datetime, end: datetime) -> tuple[list[UsageRow], FleetTotals]:
    """The usage ledger between ``start`` and ``end`` on the fleet calendar (ticks ending in
    ``[start, end)``, ``scheduling.fleet_calendar``), per team, accelerator and kind, with the
    fleet's capacity, idle and down GPU-hours over the same ticks. Three queries."""
    epoch = fleet_epoch()
    from_s, to_s = fleet_seconds(start, epoch=epoch), fleet_seconds(end, epoch=epoch)
    rows = (
        UsageSample.objects.filter(sim_time_s__gte=from_s, sim_time_s__lt=to_s)
        .values("team__name", "team__department__name", "accelerator_type__name", "kind")
        .annotate(
            allocated=Sum("allocated_gpu_s"),
            useful=Sum("useful_gpu_s"),
            lost=Sum("lost_gpu_s"),
            borrowed=Sum("borrowed_gpu_s"),
        )
        .order_by("team__name", "accelerator_type__name", "kind")
    )
    usage = [
        UsageRow(
            r["team__name"],
            r["team__department__name"],
            r["accelerator_type__name"],
            r["kind"],
            r["allocated"] / 3600,
            r["useful"] / 3600,
            r["lost"] / 3600,
            r["borrowed"] / 3600,
        )
        for r in rows
    ]
    fleet = FleetSample.objects.filter(sim_time_s__gte=from_s, sim_time_s__lt=to_s).aggregate(
        capacity=Sum(F("capacity_gpus") * F("interval_s")),
        idle=Sum("idle_gpu_s"),
        down=Sum("down_gpu_s"),
    )
    allocated = sum(row.allocated_gpu_h for row in usage)
    totals = FleetTotals(
        (fleet["capacity"] or 0.0) / 3600, allocated, (fleet["idle"] or 0.0) / 3600, (fleet["down"] or 0.0) / 3600
    )
    return usage, totals


@dataclass(frozen=True, slots=True)
class QuotaLeft:
    """What a team may still start on one accelerator type: within its guarantee (never
    preempted for quota) and with borrowing (None: unlimited)."""

    accelerator_type_id: int
    accelerator: str
    guaranteed: int
    in_use: int
    guaranteed_left: int
    borrow_left: int | None


def quota_left_for_teams(*, teams: QuerySet[Team]) -> dict[int, list[QuotaLeft]]:
    """Per team of ``teams`` (already scoped to the user), per accelerator type, the quota left
    now; four queries per team."""
    left: dict[int, list[QuotaLeft]] = {}
    for team in teams:
        left[team.pk] = [
            QuotaLeft(
                row.accelerator_type_id,
                row.accelerator_type,
                row.guaranteed,
                row.in_use,
                max(0, row.guaranteed - row.in_use),
                None if row.borrow_limit is None else max(0, row.guaranteed + row.borrow_limit - row.in_use),
            )
            for row in quota_overview_for_team(team=team)
        ]
    return left


def default_accelerator_for(left: list[QuotaLeft]) -> int | None:
    """The accelerator type a team most likely runs on: its largest guarantee, then its largest use."""
    best = max(left, key=lambda row: (row.guaranteed, row.in_use), default=None)
    return None if best is None else best.accelerator_type_id
