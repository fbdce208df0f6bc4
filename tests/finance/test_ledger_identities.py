"""The usage ledger adds up, on a ledger the real cycle wrote over a few hundred ticks with
borrowing, preemption by serving work and a node failure in it."""

from __future__ import annotations

from collections import defaultdict

import pytest
from django.db.models import F, Sum

from scheduling.cycle.failures import node_kill
from scheduling.models import FleetSample, Job, JobUsage, Node, SchedulerEvent, UsageSample
from tests.scheduling.conftest import Fleet

# Five fleet hours in 100 ticks of three fleet minutes: the identities hold on every tick whatever
# its length, and the scenario (borrowing, a serving job preempting training, a node failure, late
# arrivals) falls on the same fleet times as with 300 one-minute ticks, a third of the cycles.
TICKS = 100
TICK_SPEED = 180.0  # fleet seconds per tick (one wall second each)


def _live_ledger(fleet: Fleet) -> Fleet:
    # The team is guaranteed 16 of 32 GPUs and may borrow: 24 GPUs of training borrows 8.
    for gpus, duration_s in ((8, 3 * 3600.0), (8, 2 * 3600.0), (8, 5 * 3600.0), (4, 1800.0), (2, 900.0)):
        fleet.submit(gpus=gpus, duration_s=duration_s, checkpoint_interval_s=1200.0)
    for tick in range(TICKS):
        if tick == 15:
            fleet.submit(gpus=8, kind="serving", priority_class_id=fleet.serving.pk, name="api", duration_s=4 * 3600.0)
        if tick == 30:
            # The node of the longest-running training job: it fails well before the job ends.
            longest = Job.objects.filter(state=Job.State.RUNNING, kind="training").order_by("-duration_s").first()
            assert longest is not None
            node = Node.objects.get(allocations__job=longest)
            clock = fleet.ticks[-1]
            assert clock is not None
            node_kill(node=node, sim_now_s=clock.sim_to_s)
        if tick % 20 == 10:
            fleet.submit(gpus=8, duration_s=3600.0)
        fleet.tick(speed=TICK_SPEED)
    return fleet


def test_the_live_cycles_ledger_adds_up(fleet: Fleet) -> None:
    live = _live_ledger(fleet)
    _it_saw_borrowing_preemption_and_a_failure(live)
    _allocated_idle_and_down_add_up_to_capacity_on_every_tick(live)
    _allocated_idle_and_down_add_up_to_capacity_over_the_whole_period(live)
    _useful_and_lost_add_up_to_allocated_on_every_row(live)
    _the_per_job_ledger_sums_to_the_per_team_rows(live)
    _borrowed_is_within_allocated_and_covers_each_ticks_excess_over_the_guarantee(live)


def _it_saw_borrowing_preemption_and_a_failure(live: Fleet) -> None:
    totals = UsageSample.objects.aggregate(borrowed=Sum("borrowed_gpu_s"), lost=Sum("lost_gpu_s"))
    assert totals["borrowed"] > 0
    assert totals["lost"] > 0
    evicted = SchedulerEvent.objects.filter(kind=SchedulerEvent.Kind.EVICTED).values_list("message", flat=True)
    assert len(evicted) >= 2, list(evicted)
    assert FleetSample.objects.filter(down_gpu_s__gt=0).exists()
    # Rolled-back work moves from useful to lost in the tick that loses it.
    assert UsageSample.objects.filter(useful_gpu_s__lt=F("allocated_gpu_s") - 1.0).exists()


def _allocated_idle_and_down_add_up_to_capacity_on_every_tick(live: Fleet) -> None:
    allocated = dict(UsageSample.objects.values_list("sim_time_s").annotate(Sum("allocated_gpu_s")))
    samples = FleetSample.objects.filter(interval_s__gt=0)
    assert samples.count() == TICKS
    for sample in samples:
        capacity = sample.capacity_gpus * sample.interval_s
        assert allocated.get(sample.sim_time_s, 0.0) + sample.idle_gpu_s + sample.down_gpu_s == pytest.approx(
            capacity, abs=1e-6
        )
        assert sample.idle_gpu_s >= -1e-9 and sample.down_gpu_s >= 0


def _allocated_idle_and_down_add_up_to_capacity_over_the_whole_period(live: Fleet) -> None:
    fleet = FleetSample.objects.aggregate(
        capacity=Sum(F("capacity_gpus") * F("interval_s")), idle=Sum("idle_gpu_s"), down=Sum("down_gpu_s")
    )
    allocated = UsageSample.objects.aggregate(total=Sum("allocated_gpu_s"))["total"]
    assert allocated + fleet["idle"] + fleet["down"] == pytest.approx(fleet["capacity"], rel=1e-12)


def _useful_and_lost_add_up_to_allocated_on_every_row(live: Fleet) -> None:
    for row in (*UsageSample.objects.all(), *JobUsage.objects.all()):
        assert row.useful_gpu_s + row.lost_gpu_s == pytest.approx(row.allocated_gpu_s, abs=1e-6)
        # Lost is restore + topology + rolled back by evictions + rolled back by failures.
        parts = (row.lost_restore_gpu_s, row.lost_topology_gpu_s, row.lost_evicted_gpu_s, row.lost_failed_gpu_s)
        assert sum(parts) == pytest.approx(row.lost_gpu_s, abs=1e-6)


def _the_per_job_ledger_sums_to_the_per_team_rows(live: Fleet) -> None:
    fields = (
        "allocated_gpu_s",
        "useful_gpu_s",
        "lost_gpu_s",
        "borrowed_gpu_s",
        "lost_restore_gpu_s",
        "lost_topology_gpu_s",
        "lost_evicted_gpu_s",
        "lost_failed_gpu_s",
    )
    per_team: dict[tuple[int, int, str], list[float]] = defaultdict(lambda: [0.0] * len(fields))
    for row in UsageSample.objects.values("team_id", "accelerator_type_id", "kind", *fields):
        key = (row["team_id"], row["accelerator_type_id"], row["kind"])
        per_team[key] = [a + row[f] for a, f in zip(per_team[key], fields, strict=True)]
    per_job: dict[tuple[int, int, str], list[float]] = defaultdict(lambda: [0.0] * len(fields))
    for row in JobUsage.objects.values("team_id", "accelerator_type_id", "kind", *fields):
        key = (row["team_id"], row["accelerator_type_id"], row["kind"])
        per_job[key] = [a + row[f] for a, f in zip(per_job[key], fields, strict=True)]
    assert per_job.keys() == per_team.keys()
    for key, sums in per_team.items():
        assert per_job[key] == pytest.approx(sums, abs=1e-6)


def _borrowed_is_within_allocated_and_covers_each_ticks_excess_over_the_guarantee(live: Fleet) -> None:
    # Borrowed is the integral of the GPUs held beyond the guarantee (16), whatever the runs' flags:
    # at most what was allocated, and at least the tick's allocated time beyond 16 GPUs (equal to
    # it when the team held 16 or more all tick), summed over the team's job kinds.
    for row in (*UsageSample.objects.all(), *JobUsage.objects.all()):
        assert -1e-9 <= row.borrowed_gpu_s <= row.allocated_gpu_s + 1e-6
    ticks = UsageSample.objects.values("sim_time_s", "interval_s").annotate(
        allocated=Sum("allocated_gpu_s"), borrowed=Sum("borrowed_gpu_s")
    )
    for tick in ticks:
        assert tick["borrowed"] >= tick["allocated"] - 16 * tick["interval_s"] - 1e-6, tick
