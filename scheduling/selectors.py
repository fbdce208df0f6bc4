"""Read-side queries for the fleet and its jobs. Job selectors are scoped by ``user=``."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import Count, Q, QuerySet, Sum
from django.http import Http404

from core.compiled_queries import CompiledQuery
from fleet.models import AcceleratorType, Node, Pod
from fleet.selectors import fleet_gpus_by_type
from scheduling import engine
from scheduling.convert import policy_from_row, quota_from_row, team_from_row
from scheduling.engine.fairshare import decay_usage, entitlements, fairshare_factors, fairshare_priorities
from scheduling.engine.serving import DEFAULT_SLO_S, Attainment, ReplicaRecord, slo_attainment
from scheduling.listed import ListedJob, listed_by_id
from scheduling.live.waits import JobWait, job_waits_for
from scheduling.models import Allocation, FleetSample, Job, SchedulerEvent, TeamUsage, UsageSample
from tenants.models import FleetPolicy, Membership, Quota, Team
from tenants.permissions import is_fleet_admin, member_team_ids
from tenants.selectors import QuotaRow

if TYPE_CHECKING:
    from scheduling.estimates import EstimateView

AnyUser = User | AnonymousUser


@dataclass(frozen=True, slots=True)
class FleetSummary:
    pods: int
    racks: int
    nodes: int
    gpus: int
    healthy_gpus: int
    nodes_up: int


def fleet_racks() -> QuerySet[Pod, Any]:
    return Pod.objects.values("id").annotate(rack_count=Count("racks")).order_by()


def fleet_nodes() -> QuerySet[Node, Any]:
    return (
        Node.objects.values("state")
        .annotate(nodes=Count("id"), gpus=Sum("gpus"), healthy=Sum("healthy_gpus"))
        .order_by()
    )


# The dashboard asks both on each request: their SQL is built once (`CompiledQuery`), not on each.
FLEET_RACKS = CompiledQuery(fleet_racks)
FLEET_NODES = CompiledQuery(fleet_nodes)


def fleet_summary() -> FleetSummary:
    """Size and health of the whole fleet, in two queries: racks by pod, nodes by state."""
    pods = FLEET_RACKS.rows()
    nodes = FLEET_NODES.rows()
    return FleetSummary(
        pods=len(pods),
        racks=sum(row["rack_count"] for row in pods),
        nodes=sum(row["nodes"] for row in nodes),
        gpus=sum(row["gpus"] or 0 for row in nodes),
        healthy_gpus=sum(row["healthy"] or 0 for row in nodes),
        nodes_up=sum(row["nodes"] for row in nodes if row["state"] == Node.State.UP),
    )


def _memberships_of(user: AnyUser) -> QuerySet[Membership]:
    """The user's team memberships (none when signed out)."""
    if not user.is_authenticated:
        return Membership.objects.none()
    return Membership.objects.filter(user_id=user.pk)


def jobs_for_user(*, user: AnyUser, states: tuple[str, ...] | None = None) -> QuerySet[Job]:
    """Jobs the user may see: their teams' jobs, or every job for fleet admins."""
    jobs = Job.objects.select_related("team", "accelerator_type", "priority_class")
    if not is_fleet_admin(user):
        jobs = jobs.filter(team__in=_memberships_of(user).values("team_id"))
    if states:
        jobs = jobs.filter(state__in=states)
    return jobs


def job_for_user(*, user: AnyUser, job_id: int) -> Job:
    job = jobs_for_user(user=user).select_related("submitted_by").filter(pk=job_id).first()
    if job is None:
        raise Http404("No such job.")
    return job


@dataclass(frozen=True, slots=True)
class JobRow:
    """A job as the pages list it: the row, and for a pending job why it waits and when it should
    start, as the latest cycle saw it (``None`` for a job in any other state)."""

    job: Job | ListedJob
    wait: JobWait | None
    # How far its estimate can be trusted, where a page shows it (`scheduling.estimates`).
    estimate: EstimateView | None = None


def job_rows(*, jobs: Iterable[Job | ListedJob]) -> list[JobRow]:
    """Each job with its wait, read in one Redis call for all the pending ones."""
    jobs = list(jobs)
    waits = job_waits_for(job_ids=[job.pk for job in jobs if job.state == Job.State.PENDING])
    return [JobRow(job, waits.get(job.pk)) for job in jobs]


def pending_jobs_for_team(*, team: Team, limit: int = 50) -> list[JobRow]:
    """The team's queued jobs, oldest first, each with its wait."""
    jobs = Job.objects.filter(team=team, state=Job.State.PENDING).order_by("submit_s", "id")
    return job_rows(jobs=listed_by_id(list(jobs.values_list("pk", flat=True)[:limit])))


def job_events(*, job: Job, limit: int = 200) -> list[SchedulerEvent]:
    """The job's history, newest first, with the node each event names (for its link)."""
    return list(SchedulerEvent.objects.filter(job=job).select_related("node").order_by("-id")[:limit])


def job_nodes(*, job: Job | ListedJob) -> list[tuple[str, int]]:
    return list(Allocation.objects.filter(job_id=job.pk).order_by("node__name").values_list("node__name", "gpus"))


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
    own_gpus: int = 0  # GPUs of the node held by the viewer's own teams' jobs


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
    any other job shows only as another team's, with its GPU count. ``own_gpus`` counts a
    member's own teams' GPUs on each node, for highlighting."""
    admin = is_fleet_admin(user)
    own_teams = frozenset() if admin else member_team_ids(user)
    jobs_on: dict[int, list[str]] = {}
    own_on: dict[int, int] = {}
    for node_id, name, team_id, gpus in Allocation.objects.order_by("job_id").values_list(
        "node_id", "job__name", "job__team_id", "gpus"
    ):
        label = name if admin or team_id in own_teams else OTHER_TEAMS_JOB
        jobs_on.setdefault(node_id, []).append(f"{label} ({gpus})")
        if team_id in own_teams:
            own_on[node_id] = own_on.get(node_id, 0) + gpus
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
                own_on.get(row["id"], 0),
            )
        )
    return list(pods.values())


def quota_overview_for_team(*, team: Team) -> list[QuotaRow]:
    """One row per accelerator type with the team's quota and what it uses, borrows and lends
    right now. A type without a quota row means no guarantee and unlimited borrowing, as the
    scheduler reads it. Four queries."""
    quotas = {q.accelerator_type_id: q for q in Quota.objects.filter(team=team)}
    capacity = fleet_gpus_by_type()
    in_use: dict[int, int] = defaultdict(int)
    borrowed: dict[int, int] = defaultdict(int)
    borrowed_by_others: dict[int, int] = defaultdict(int)
    for type_id, team_id, borrowing, gpus in (
        Allocation.objects.filter(job__state=Job.State.RUNNING)
        .values_list("job__accelerator_type_id", "job__team_id", "job__borrowing")
        .annotate(total=Sum("gpus"))
        .order_by()
    ):
        if team_id == team.pk:
            in_use[type_id] += gpus
            borrowed[type_id] += gpus if borrowing else 0
        elif borrowing:
            borrowed_by_others[type_id] += gpus
    rows = []
    for accelerator_type in AcceleratorType.objects.order_by("name"):
        quota, type_id = quotas.get(accelerator_type.pk), accelerator_type.pk
        guaranteed = quota.guaranteed if quota else 0
        rows.append(
            QuotaRow(
                accelerator_type_id=type_id,
                accelerator_type=accelerator_type.name,
                guaranteed=guaranteed,
                borrow_limit=quota.borrow_limit if quota else None,
                lend_limit=quota.lend_limit if quota else None,
                fleet_gpus=capacity.get(type_id, 0),
                in_use=in_use[type_id],
                borrowed=min(borrowed[type_id], max(0, in_use[type_id] - guaranteed)),
                lent=min(max(0, guaranteed - in_use[type_id]), borrowed_by_others[type_id]),
            )
        )
    return rows


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

    @property
    def text(self) -> str:
        """The quota left, in one sentence for the submit form."""
        # Borrowing takes GPUs other teams lend (their idle guarantees, within their lend limits):
        # the limit says how far the team may go, never that the GPUs are there.
        borrow = (
            "no borrowing limit"
            if self.borrow_left is None
            else f"up to {self.borrow_left} with borrowing, as far as other teams lend idle GPUs"
        )
        return (
            f"Your team uses {self.in_use} {self.accelerator} GPUs: {self.guaranteed_left} more within its "
            f"guarantee, {borrow}."
        )


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


@dataclass(frozen=True, slots=True)
class FairshareStanding:
    """A team's place in the fair-share order: lower usage per entitlement goes first."""

    rank: int  # 1 goes first among teams of the same priority class
    teams: int
    decayed_gpu_h: float
    entitlement: float  # guaranteed GPUs times fair-share weight (at least one GPU)
    factor: float  # Slurm's 2^(-U/S): 1.0 nothing used, 0.5 exactly its share, towards 0 beyond
    orders_queue: bool  # the policy orders the queue by fair share (else by shortest time limit)
    least_borrowed_first: bool  # the borrowers of the teams that borrow least go first
    quota_hold_after_h: float | None  # a team's job waiting this many hours keeps its size within the limit


def fairshare_standings(*, sim_now_s: float) -> dict[int, FairshareStanding]:
    """Every team's fair-share standing now, computed by the engine's own functions from the
    decayed usage the cycle keeps. Four queries."""
    policy = policy_from_row(FleetPolicy.objects.order_by("pk").first())
    teams: tuple[engine.Team, ...] = tuple(
        team_from_row(row) for row in Team.objects.order_by("id").values("id", "department_id", "fairshare_weight")
    )
    quotas = tuple(
        quota_from_row(row)
        for row in Quota.objects.order_by("id").values(
            "team_id", "accelerator_type__name", "guaranteed", "borrow_limit", "lend_limit"
        )
    )
    used = {team.id: 0.0 for team in teams}
    for team_id, value, as_of in TeamUsage.objects.values_list("team_id", "decayed_gpu_s", "as_of_s"):
        used[str(team_id)] = decay_usage(value, sim_now_s - as_of, policy.fairshare_half_life_s)
    entitled = entitlements(teams, quotas)
    priorities = fairshare_priorities(fairshare_factors(sorted(used.items()), teams, quotas))
    order = sorted(priorities, key=lambda team_id: (-priorities[team_id], int(team_id)))
    return {
        int(team_id): FairshareStanding(
            rank=order.index(team_id) + 1,
            teams=len(order),
            decayed_gpu_h=used[team_id] / 3600,
            entitlement=entitled.get(team_id, 1.0),
            factor=priorities[team_id],
            orders_queue=policy.queue_order == "fair_share",
            least_borrowed_first=policy.least_borrowed_first,
            quota_hold_after_h=None if policy.quota_hold_after_s is None else policy.quota_hold_after_s / 3600,
        )
        for team_id in order
    }


@dataclass(frozen=True, slots=True)
class TeamUsagePoint:
    sim_time_s: float  # the start of the bucket
    gpus_by_kind: dict[str, float]  # mean GPUs allocated over the bucket, per job kind


def team_usage_series(
    *, team: Team, sim_now_s: float, window_s: float = 86_400.0, buckets: int = 96
) -> list[TeamUsagePoint]:
    """The team's mean allocated GPUs per job kind over the last ``window_s`` of fleet time, in
    ``buckets`` equal buckets, from the usage ledger. One query."""
    start_s = max(0.0, sim_now_s - window_s)
    width_s = max(window_s / buckets, 1.0)
    totals: dict[int, dict[str, float]] = {}
    for sim_time_s, kind, allocated in UsageSample.objects.filter(team=team, sim_time_s__gt=start_s).values_list(
        "sim_time_s", "kind", "allocated_gpu_s"
    ):
        bucket = totals.setdefault(int((sim_time_s - start_s) // width_s), {})
        bucket[kind] = bucket.get(kind, 0.0) + allocated
    filled = int(min(buckets, (sim_now_s - start_s) // width_s + 1))
    return [
        TeamUsagePoint(start_s + i * width_s, {kind: gpu_s / width_s for kind, gpu_s in totals.get(i, {}).items()})
        for i in range(filled)
    ]


@dataclass(frozen=True, slots=True)
class TeamOverviewRow:
    team: Team
    guaranteed_gpus: int
    in_use_gpus: int
    pending_jobs: int
    pending_gpus: int


def team_overview_rows(*, teams: QuerySet[Team]) -> list[TeamOverviewRow]:
    """Per team of ``teams`` (already scoped to the user): GPUs guaranteed over every accelerator
    type, GPUs in use, and the queue (jobs and GPUs). Four queries, whatever the number of teams."""
    listed = list(teams.order_by("name"))
    ids = [team.pk for team in listed]
    guaranteed = dict(
        Quota.objects.filter(team_id__in=ids)
        .values("team_id")
        .annotate(total=Sum("guaranteed"))
        .values_list("team_id", "total")
    )
    in_use = dict(
        Allocation.objects.filter(job__team_id__in=ids, job__state=Job.State.RUNNING)
        .values("job__team_id")
        .annotate(total=Sum("gpus"))
        .values_list("job__team_id", "total")
    )
    queued = {
        row["team_id"]: (row["jobs"], row["gpus"] or 0)
        for row in Job.objects.filter(team_id__in=ids, state=Job.State.PENDING)
        .values("team_id")
        .annotate(jobs=Count("id"), gpus=Sum("gpus"))
    }
    return [
        TeamOverviewRow(
            team,
            guaranteed.get(team.pk) or 0,
            in_use.get(team.pk) or 0,
            queued.get(team.pk, (0, 0))[0],
            queued.get(team.pk, (0, 0))[1],
        )
        for team in listed
    ]


OTHER_TEAMS = "other teams"


@dataclass(frozen=True, slots=True)
class TeamGpus:
    label: str
    gpus: int
    own: bool


def team_gpus_running() -> QuerySet[Allocation, Any]:
    return (
        Allocation.objects.filter(job__state=Job.State.RUNNING)
        .values("job__team_id", "job__team__name")
        .annotate(total=Sum("gpus"))
        .order_by("job__team__name")
    )


# The dashboard asks it on each request: its SQL is built once (`CompiledQuery`), not on each.
TEAM_GPUS = CompiledQuery(team_gpus_running)


def team_gpus_now(*, user: AnyUser) -> list[TeamGpus]:
    """GPUs in use now per team. Fleet admins see every team by name; anyone else sees their own
    teams by name and every other team merged as one, so team names do not leak. Two queries
    besides the user's roles."""
    admin = is_fleet_admin(user)
    own_teams = member_team_ids(user)
    named: list[TeamGpus] = []
    others = 0
    for row in TEAM_GPUS.rows():
        team_id, name, gpus = row["job__team_id"], row["job__team__name"], row["total"]
        if admin or team_id in own_teams:
            named.append(TeamGpus(name, gpus or 0, team_id in own_teams))
        else:
            others += gpus or 0
    return named + ([TeamGpus(OTHER_TEAMS, others, False)] if others else [])


# Deployments carry no objective of their own yet: every replica is held to the simulator's default.
SERVING_SLO_S = DEFAULT_SLO_S
FLEET_DAY_S = 86400.0

_ENDED = (Job.State.CANCELLED, Job.State.COMPLETED, Job.State.TIMED_OUT)
_REPLICA_FIELDS = ("id", "submit_s", "state", "started_s", "anchor_s", "finished_s", "restarts")


def serving_attainment_over(*, since_s: float, until_s: float) -> Attainment:
    """Attainment of every deployment's replicas over fleet time [since_s, until_s), by the
    simulator's own function (`engine.serving.slo_attainment`, the simulator's
    `serving_slo_attainment` and `serving_start_p99_s`) on the replicas' rows. Two queries.

    A replica serves from its start plus its handover or restore (the row's progress anchor);
    for the earlier runs of a replica restarted after a node failure, from the start its event
    records."""
    rows = list(
        Job.objects.filter(deployment__isnull=False, submit_s__lt=until_s)
        .filter(Q(finished_s__isnull=True) | Q(finished_s__gt=since_s))
        .order_by("id")
        .values_list(*_REPLICA_FIELDS, named=True)
    )
    history: dict[int, list[tuple[str, float]]] = defaultdict(list)
    restarted = [row.id for row in rows if row.restarts]
    if restarted:
        for job_id, kind, time_s in (
            SchedulerEvent.objects.filter(
                job_id__in=restarted, kind__in=(SchedulerEvent.Kind.STARTED, SchedulerEvent.Kind.EVICTED)
            )
            .order_by("job_id", "sim_time_s", "id")
            .values_list("job_id", "kind", "sim_time_s")
        ):
            history[job_id].append((kind, time_s))
    records = [_replica_record(row, history.get(row.id, [])) for row in rows]
    return slo_attainment(records, SERVING_SLO_S, (since_s, until_s))


def _replica_record(row: Any, events: list[tuple[str, float]]) -> ReplicaRecord:
    ended_s = row.finished_s if row.state in _ENDED else None
    current = _serving_from(row)
    if not events:
        return ReplicaRecord(row.submit_s, ended_s, ((current, ended_s),) if current is not None else ())
    runs: list[tuple[float, float | None]] = []
    for kind, time_s in events:
        if kind == SchedulerEvent.Kind.STARTED:
            runs.append((time_s, None))
        elif runs and runs[-1][1] is None:
            runs[-1] = (runs[-1][0], time_s)
    if runs and runs[-1][1] is None:
        last_from = current if current is not None and current >= runs[-1][0] else runs[-1][0]
        runs[-1] = (last_from, ended_s)
    return ReplicaRecord(row.submit_s, ended_s, tuple(runs))


def _serving_from(row: Any) -> float | None:
    started_s, anchor_s = row.started_s, row.anchor_s
    if started_s is None:
        return None
    return anchor_s if anchor_s is not None and anchor_s >= started_s else started_s


def serving_attainment_last_day(*, sim_now_s: float) -> Attainment:
    """Attainment over the last fleet day (the dashboard's figure)."""
    return serving_attainment_over(since_s=max(0.0, sim_now_s - FLEET_DAY_S), until_s=sim_now_s)
