"""What ``/metrics`` reports about the fleet, read at scrape time from the database and Redis.

Every figure here is computed from shared, durable state rather than kept in a process's memory:
the cycle runs in whichever Celery worker leads (on any machine) and ``/metrics`` is answered by
any web process, so only what every process can read gives the same answer whoever is scraped.
Gauges are the fleet as it stands (nodes, allocations, the queue). Counters are counts and sums
over rows the product never deletes (scheduler events, incidents, the usage ledger), so they only
grow and survive restarts of every process; over the long histories (events, ledger) they are
kept as checkpointed totals (``observability.counters``), so that a scrape reads only the rows
added since. A fixed number of queries, whatever the fleet size.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import redis
from django.conf import settings
from django.db.models import Count, F, Q, Sum
from django.utils import timezone
from prometheus_client.utils import floatToGoString
from redis.exceptions import RedisError

from observability.counters import EVENTS, LEDGER, counter_totals
from scheduling.engine.quota import borrowed_gpus
from scheduling.live.cycle_timings import StepHistogram, cycle_timings_read
from scheduling.live.waits import NEW_JOB_REASON, WAITS_KEY
from scheduling.models import AcceleratorType, Allocation, FleetClock, Incident, Job, Node
from tenants.models import Quota, Team

# Fleet seconds from a failure to its detection, and to the gangs computing again.
DETECTION_BUCKETS_S: tuple[float, ...] = (10, 30, 60, 120, 300, 600, 1800, 3600)
RECOVERY_BUCKETS_S: tuple[float, ...] = (60, 300, 600, 1800, 3600, 7200, 21600, 86400)


@dataclass(frozen=True, slots=True)
class IncidentHistogram:
    kind: str
    buckets: tuple[tuple[str, int], ...]  # cumulative, ending with +Inf
    sum_s: float
    count: int


@dataclass
class FleetMetrics:
    """Filled in by ``fleet_metrics_read``; plain data for the collector."""

    # (accelerator) -> GPUs
    capacity_gpus: dict[str, int] = field(default_factory=dict)
    healthy_gpus: dict[str, int] = field(default_factory=dict)
    # (accelerator, state) -> nodes
    nodes: dict[tuple[str, str], int] = field(default_factory=dict)
    # (team, accelerator, kind) -> GPUs held by running jobs
    allocated_gpus: dict[tuple[str, str, str], int] = field(default_factory=dict)
    # (team, accelerator) -> GPUs held beyond the team's guarantee
    borrowed_gpus: dict[tuple[str, str], int] = field(default_factory=dict)
    # (team, accelerator, state) -> jobs, for the active states
    jobs: dict[tuple[str, str, str], int] = field(default_factory=dict)
    # (team, reason) -> pending jobs
    pending_by_reason: dict[tuple[str, str], int] = field(default_factory=dict)
    # counters: (team) -> events
    starts: dict[str, int] = field(default_factory=dict)
    preemptions: dict[str, int] = field(default_factory=dict)
    # (kind) -> incidents, open incidents
    failures: dict[str, int] = field(default_factory=dict)
    open_incidents: dict[str, int] = field(default_factory=dict)
    # (team, accelerator) -> GPU-hours rolled back by preemptions and failures (the usage ledger)
    lost_gpu_hours: dict[tuple[str, str], float] = field(default_factory=dict)
    failure_lost_gpu_hours: dict[str, float] = field(default_factory=dict)
    detection: tuple[IncidentHistogram, ...] = ()
    recovery: tuple[IncidentHistogram, ...] = ()
    cycle_steps: tuple[StepHistogram, ...] = ()
    fleet_time_s: float = 0.0
    ticks: int = 0
    last_tick_age_s: float | None = None
    redis_up: bool = True


REDIS_TIMEOUT_S = 1.0


def _redis() -> redis.Redis:
    return redis.Redis.from_url(
        settings.REDIS_URL, socket_connect_timeout=REDIS_TIMEOUT_S, socket_timeout=REDIS_TIMEOUT_S
    )


def fleet_metrics_read() -> FleetMetrics:
    """The whole fleet's figures: fourteen database queries (four more when history settles into
    the counters' checkpoints) and two Redis reads."""
    metrics = FleetMetrics()
    # Without Redis the database's figures are still worth reporting: the Redis-held ones (step
    # timings, pending reasons) are left out and fleetline_redis_up says why.
    client = _redis()
    try:
        metrics.cycle_steps = tuple(cycle_timings_read(client=client))
        raw_pending: Any = client.get(WAITS_KEY)
    except RedisError:
        metrics.redis_up = False
        raw_pending = None
    finally:
        client.close()
    _read_nodes(metrics)
    _read_allocations(metrics)
    _read_jobs(metrics, raw_pending)
    _read_counters(metrics)
    _read_incidents(metrics)
    _read_clock(metrics)
    return metrics


def _read_nodes(metrics: FleetMetrics) -> None:
    rows = Node.objects.values("accelerator_type__name", "state").annotate(
        nodes=Count("id"), gpus=Sum("gpus"), healthy=Sum("healthy_gpus")
    )
    for row in rows:
        accelerator = row["accelerator_type__name"]
        metrics.nodes[(accelerator, row["state"])] = row["nodes"]
        metrics.capacity_gpus[accelerator] = metrics.capacity_gpus.get(accelerator, 0) + (row["gpus"] or 0)
        healthy = 0 if row["state"] == Node.State.DOWN else (row["healthy"] or 0)
        metrics.healthy_gpus[accelerator] = metrics.healthy_gpus.get(accelerator, 0) + healthy


def _read_allocations(metrics: FleetMetrics) -> None:
    """GPUs held by running jobs, and what each team borrows of them: per accelerator, those beyond
    its guarantee (`borrowed_gpus`, as the usage ledger books it), whatever its runs' `borrowing`
    flags say (they record how each run was admitted, not what the team borrows now)."""
    rows = (
        Allocation.objects.filter(job__state=Job.State.RUNNING)
        .values("job__team__slug", "job__accelerator_type__name", "job__kind")
        .annotate(gpus=Sum("gpus"))
    )
    held: dict[tuple[str, str], int] = {}
    for row in rows:
        team, accelerator = row["job__team__slug"], row["job__accelerator_type__name"]
        key = (team, accelerator, row["job__kind"])
        metrics.allocated_gpus[key] = metrics.allocated_gpus.get(key, 0) + row["gpus"]
        held[(team, accelerator)] = held.get((team, accelerator), 0) + row["gpus"]
    # Every quota row (one per team and accelerator, a few hundred at most): one query, whatever runs.
    guarantees = Quota.objects.values_list("team__slug", "accelerator_type__name", "guaranteed")
    guaranteed = {(team, accelerator): gpus for team, accelerator, gpus in guarantees}
    for group, gpus in held.items():
        borrowed = borrowed_gpus(gpus, guaranteed.get(group, 0))  # no quota row: no guarantee
        if borrowed:
            metrics.borrowed_gpus[group] = borrowed


def _read_jobs(metrics: FleetMetrics, raw_pending: bytes | None) -> None:
    rows = (
        Job.objects.filter(state__in=Job.ACTIVE_STATES)
        .values("team__slug", "accelerator_type__name", "state")
        .annotate(jobs=Count("id"))
    )
    for row in rows:
        metrics.jobs[(row["team__slug"], row["accelerator_type__name"], row["state"])] = row["jobs"]
    # The latest cycle's reason for each pending job (scheduling.live.waits). The label keeps
    # the reason's kind only ("reserved-for:<job>" counts as "reserved-for"), so that the number of
    # series stays bounded whatever the queue.
    if not metrics.redis_up:
        return
    document = json.loads(raw_pending) if raw_pending else {}
    reasons: Counter[tuple[str, str]] = Counter()
    for job_id, team in Job.objects.filter(state=Job.State.PENDING).values_list("id", "team__slug"):
        reason = (document.get(str(job_id)) or [NEW_JOB_REASON])[0]
        reasons[(team, str(reason).split(":", 1)[0])] += 1
    metrics.pending_by_reason.update(reasons)


def _read_counters(metrics: FleetMetrics) -> None:
    """Starts, preemptions and lost GPU-hours: checkpointed totals over the append-only history."""
    events, ledger = counter_totals(EVENTS), counter_totals(LEDGER)
    team_ids = {key[0] for key in events} | {key[0] for key in ledger}
    slugs = dict(Team.objects.filter(id__in=team_ids).values_list("id", "slug"))
    accelerators = dict(AcceleratorType.objects.values_list("id", "name"))
    for (team_id,), (starts, preemptions) in events.items():
        if team_id is None or team_id in slugs:  # events of a deleted team are gone with it
            team = slugs.get(team_id, "")
            metrics.starts[team] = metrics.starts.get(team, 0) + int(starts)
            metrics.preemptions[team] = metrics.preemptions.get(team, 0) + int(preemptions)
    for (team_id, accelerator_id), (lost_gpu_s,) in ledger.items():
        if team_id in slugs and accelerator_id in accelerators:
            metrics.lost_gpu_hours[(slugs[team_id], accelerators[accelerator_id])] = lost_gpu_s / 3600.0


def _histogram_counts(bounds: tuple[float, ...], end: str, among: Q) -> dict[str, Count]:
    return {
        f"le_{index}": Count("id", filter=among & Q(**{f"{end}__isnull": False, f"{end}__lte": F("failed_at") + bound}))
        for index, bound in enumerate(bounds)
    }


# Recovery is the gangs computing again after the detection; a slowdown nobody noticed (its incident
# closed by the node's repair, never detected) stopped no gang and has no recovery time.
_RECOVERED = Q(detected_at__isnull=False, resumed_at__isnull=False)


def _read_incidents(metrics: FleetMetrics) -> None:
    rows = (
        Incident.objects.values("kind")
        .annotate(
            incidents=Count("id"),
            # Not "open": `Incident.open` is a property, which the annotation would shadow.
            still_open=Count("id", filter=Q(resumed_at__isnull=True)),
            lost_gpu_s=Sum("lost_gpu_s"),
            detected=Count("detected_at"),
            detected_sum=Sum(F("detected_at") - F("failed_at")),
            resumed=Count("id", filter=_RECOVERED),
            resumed_sum=Sum(F("resumed_at") - F("failed_at"), filter=_RECOVERED),
            **{f"d_{k}": v for k, v in _histogram_counts(DETECTION_BUCKETS_S, "detected_at", Q()).items()},
            **{f"r_{k}": v for k, v in _histogram_counts(RECOVERY_BUCKETS_S, "resumed_at", _RECOVERED).items()},
        )
        .order_by("kind")
    )
    detection, recovery = [], []
    for row in rows:
        kind = row["kind"]
        metrics.failures[kind] = row["incidents"]
        metrics.open_incidents[kind] = row["still_open"]
        metrics.failure_lost_gpu_hours[kind] = (row["lost_gpu_s"] or 0.0) / 3600.0
        detection.append(_incident_histogram(row, kind, "d", DETECTION_BUCKETS_S, "detected"))
        recovery.append(_incident_histogram(row, kind, "r", RECOVERY_BUCKETS_S, "resumed"))
    metrics.detection = tuple(detection)
    metrics.recovery = tuple(recovery)


def _incident_histogram(
    row: Mapping[str, Any], kind: str, prefix: str, bounds: tuple[float, ...], total: str
) -> IncidentHistogram:
    buckets = [(floatToGoString(bound), row[f"{prefix}_le_{index}"]) for index, bound in enumerate(bounds)]
    buckets.append(("+Inf", row[total]))
    return IncidentHistogram(kind=kind, buckets=tuple(buckets), sum_s=row[f"{total}_sum"] or 0.0, count=row[total])


def _read_clock(metrics: FleetMetrics) -> None:
    clock = FleetClock.objects.filter(pk=1).values("sim_now_s", "ticks", "wall_updated_at").first()
    if clock is not None:
        metrics.fleet_time_s = clock["sim_now_s"]
        metrics.ticks = clock["ticks"]
        if clock["wall_updated_at"] is not None:
            age_s = (timezone.now() - clock["wall_updated_at"]).total_seconds()
            metrics.last_tick_age_s = max(0.0, age_s)
