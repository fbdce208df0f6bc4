"""How far the live fleet's start estimates can be trusted: each job's first estimate kept on its
row, ranges calibrated on how the latest first estimates turned out (`engine.estimate_range`), and
the range and movement shown beside a pending job's estimate.

- The first cycle that leaves a job waiting writes what it was told on the job's row
  (`first_estimates_record`): when (`first_estimate_at_s`), the start (`first_estimate_s`, null
  when the cycle could not say) and the range shown with it. Later cycles never change it, so
  the page can say how far the estimate has moved since, and `estimates_measure` how often a
  start fell within the range first shown.
- The calibration comes from the latest `HISTORY_OUTCOMES` first estimates of each size, those
  whose jobs started and those still waiting (`estimate_calibration`), kept in Redis for an hour of
  fleet time (`RECALIBRATE_EVERY_S`), so a tick or a page reads it without a query.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Protocol

from django.conf import settings
from django.db.models import F, Q

from core.redis_pools import shared_redis
from scheduling.bulk_rows import rows_update, rows_update_supported
from scheduling.engine import PendingStatus
from scheduling.engine.estimate_range import (
    DEFAULT_CALIBRATION,
    HISTORY_OUTCOMES,
    NODE_GPUS,
    RECALIBRATE_EVERY_S,
    Band,
    Calibration,
    EstimateOutcome,
    StartRange,
    calibrate,
    start_range,
)
from scheduling.live.waits import JobWait
from scheduling.models import Job
from scheduling.services.jobs import fleet_now_s

if TYPE_CHECKING:
    from scheduling.selectors import JobRow


class EstimatedJob(Protocol):
    """What an estimate's range reads of a job: a `Job` or a listed row (`scheduling.listed`)."""

    @property
    def pk(self) -> int: ...
    @property
    def gpus(self) -> int: ...
    @property
    def first_estimate_s(self) -> float | None: ...
    @property
    def first_estimate_at_s(self) -> float | None: ...


CALIBRATION_KEY = "fleetline:estimate-calibration"
BULK_BATCH = 500


Row = tuple[int, float | None, float | None, float | None, float | None, float | None, float | None]


def _outcome(row: Row, now_s: float) -> EstimateOutcome:
    """What came of one first estimate by `now_s`: started (within the range shown or not), or
    waited so far (still pending, or cancelled before it started)."""
    gpus, shown_s, estimate_s, low_s, high_s, started_s, finished_s = row
    if shown_s is None or estimate_s is None:
        raise ValueError(f"a first estimate without its start or time: {row!r}")
    estimated_s = estimate_s - shown_s
    if started_s is not None:
        held = None if low_s is None or high_s is None else low_s <= started_s <= high_s
        return EstimateOutcome(gpus, estimated_s, started_s - shown_s, True, held)
    return EstimateOutcome(gpus, estimated_s, (now_s if finished_s is None else finished_s) - shown_s, False)


def _calibration_from_rows(now_s: float) -> Calibration:
    """From the latest `HISTORY_OUTCOMES` first estimates of each size (`size_class`: gangs are
    few), as known at `now_s`. A job that ran more than once counts its latest run's start."""
    outcomes: list[EstimateOutcome] = []
    for size in (Q(gpus__lte=NODE_GPUS), Q(gpus__gt=NODE_GPUS)):
        latest = (
            Job.objects.filter(size, first_estimate_s__isnull=False, first_estimate_at_s__lte=now_s)
            .order_by("-first_estimate_at_s", "-id")
            .values_list(
                "gpus",
                "first_estimate_at_s",
                "first_estimate_s",
                "first_estimate_low_s",
                "first_estimate_high_s",
                "started_s",
                "finished_s",
            )
        )
        outcomes += [_outcome(row, now_s) for row in latest[:HISTORY_OUTCOMES]]
    return calibrate(outcomes, fallback=DEFAULT_CALIBRATION, source="this fleet's latest estimates")


def estimate_calibration(*, now_s: float | None = None) -> Calibration:
    """The calibration of the latest estimates, from Redis when a tick or a page computed it
    within the last `RECALIBRATE_EVERY_S` of fleet time (in wall seconds at the clock's speed)."""
    client = shared_redis(settings.REDIS_URL)
    raw = client.get(CALIBRATION_KEY)
    if raw:
        data = json.loads(raw)
        return Calibration(
            tuple(Band(**band) for band in data["bands"]), data["coverage"], data["samples"], data["source"]
        )
    calibration = _calibration_from_rows(fleet_now_s() if now_s is None else now_s)
    # The last band is open (`up_to_s` infinite): Python's json writes and reads it as Infinity.
    ttl_s = max(1, round(RECALIBRATE_EVERY_S / settings.FLEET_CLOCK_SPEED))
    client.set(CALIBRATION_KEY, json.dumps(asdict(calibration)), ex=ttl_s)
    return calibration


FirstEstimate = tuple[int, float, float | None, float | None, float | None]
_FIRST_ESTIMATE_FIELDS = ("first_estimate_at_s", "first_estimate_s", "first_estimate_low_s", "first_estimate_high_s")


def first_estimates_of(*, statuses: Iterable[PendingStatus], sim_now_s: float) -> list[FirstEstimate]:
    """The first estimate of each job this cycle left waiting that has none yet: (job id, when,
    the start, the range shown). Reads only; the tick works them out before its writing
    transaction, so a burst of submissions costs that transaction a few statements."""
    by_id = {status.job_id: status for status in statuses}
    # The waiting jobs never shown an estimate: a partial index holds only them (`job_unestimated_idx`).
    unseen = Job.objects.filter(state=Job.State.PENDING, first_estimate_at_s__isnull=True).values_list("pk", "gpus")
    fresh = [(job_id, gpus) for job_id, gpus in unseen if str(job_id) in by_id]
    if not fresh:
        return []
    calibration = estimate_calibration(now_s=sim_now_s)
    rows: list[FirstEstimate] = []
    for job_id, gpus in fresh:
        estimate_s = by_id[str(job_id)].estimated_start_s
        if estimate_s is None:
            rows.append((job_id, sim_now_s, None, None, None))
            continue
        shown = start_range(calibration, gpus=gpus, now_s=sim_now_s, estimated_start_s=estimate_s)
        rows.append((job_id, sim_now_s, estimate_s, shown.low_s, shown.high_s))
    return rows


def first_estimates_write(rows: list[FirstEstimate]) -> int:
    """Keep the first estimates ``first_estimates_of`` worked out (inside the tick's writing
    transaction), one statement per thousand jobs, to those still waiting; returns how many were
    written."""
    if rows_update_supported():
        unseen = Job.State.PENDING
        ids = rows_update(
            Job, match=("id", "state"), assign=_FIRST_ESTIMATE_FIELDS, rows=[(row[0], unseen, *row[1:]) for row in rows]
        )
        return len(ids)
    jobs = [Job(pk=row[0], **dict(zip(_FIRST_ESTIMATE_FIELDS, row[1:], strict=True))) for row in rows]
    Job.objects.bulk_update(jobs, list(_FIRST_ESTIMATE_FIELDS), batch_size=BULK_BATCH)
    return len(jobs)


def first_estimates_record(*, statuses: Iterable[PendingStatus], sim_now_s: float) -> int:
    """Keep the first estimate of each job this cycle left waiting that has none yet; returns how
    many were written."""
    return first_estimates_write(first_estimates_of(statuses=statuses, sim_now_s=sim_now_s))


@dataclass(frozen=True, slots=True)
class EstimateView:
    """What the pages and the API show beside a pending job's estimated start."""

    estimated_start_s: float
    likely: StartRange  # where the start should fall, `coverage` of the time
    coverage: float
    calibrated_on: int  # first estimates behind the range (0: the default calibration)
    first_estimate_s: float | None  # the start the job was first told, and when
    first_estimate_at_s: float | None

    @property
    def moved_s(self) -> float | None:
        """How far the estimate moved since it was first shown (later is positive)."""
        if self.first_estimate_s is None:
            return None
        return self.estimated_start_s - self.first_estimate_s


def estimate_view(
    *, job: EstimatedJob, wait: JobWait | None, now_s: float, calibration: Calibration
) -> EstimateView | None:
    """The range and movement of a pending job's estimate (None without an estimate)."""
    if wait is None or wait.estimated_start_s is None:
        return None
    return EstimateView(
        estimated_start_s=wait.estimated_start_s,
        likely=start_range(calibration, gpus=job.gpus, now_s=now_s, estimated_start_s=wait.estimated_start_s),
        coverage=calibration.coverage,
        calibrated_on=calibration.samples,
        first_estimate_s=job.first_estimate_s,
        first_estimate_at_s=job.first_estimate_at_s,
    )


def estimate_views_for(
    *, jobs: Iterable[EstimatedJob], waits: Mapping[int, JobWait], now_s: float | None = None
) -> dict[int, EstimateView]:
    """`estimate_view` of each pending job with an estimate; the calibration (and the fleet clock
    when `now_s` is not given) read once, and only when some job has an estimate."""
    estimated = [job for job in jobs if (wait := waits.get(job.pk)) is not None and wait.estimated_start_s is not None]
    if not estimated:
        return {}
    now_s = fleet_now_s() if now_s is None else now_s
    calibration = estimate_calibration(now_s=now_s)
    views = {
        job.pk: estimate_view(job=job, wait=waits[job.pk], now_s=now_s, calibration=calibration) for job in estimated
    }
    return {job_id: view for job_id, view in views.items() if view is not None}


def job_rows_estimated(*, rows: list[JobRow], now_s: float) -> list[JobRow]:
    """The rows, each pending one with an estimate given its range and first estimate."""
    views = estimate_views_for(
        jobs=[row.job for row in rows], waits={row.job.pk: row.wait for row in rows if row.wait}, now_s=now_s
    )
    return [replace(row, estimate=views.get(row.job.pk)) for row in rows]


@dataclass(frozen=True, slots=True)
class EstimateReliability:
    """How the first estimates of the jobs that started turned out (`estimates_measure`)."""

    started: int  # jobs with a first estimate and range that started on their first run
    within: int  # of them, started within the range first shown
    restarted_left_out: int  # started, but their start is a later run's
    waiting: int  # shown a range and still waiting

    @property
    def share(self) -> float | None:
        return self.within / self.started if self.started else None


def estimates_measure(*, since_s: float = 0.0) -> EstimateReliability:
    """Of the jobs first shown an estimate at or after `since_s` that started, how many started
    within the range first shown."""
    shown = Job.objects.filter(first_estimate_at_s__gte=since_s, first_estimate_low_s__isnull=False)
    started = shown.filter(started_s__isnull=False, restarts=0)
    within = started.filter(started_s__gte=F("first_estimate_low_s"), started_s__lte=F("first_estimate_high_s"))
    restarted = shown.filter(started_s__isnull=False, restarts__gt=0)
    waiting = shown.filter(state=Job.State.PENDING, started_s__isnull=True)
    return EstimateReliability(started.count(), within.count(), restarted.count(), waiting.count())
