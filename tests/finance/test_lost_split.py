"""Lost GPU-time split by why, on a scenario the real cycle runs and whose figures are computed by
hand: a 24-GPU gang spread over the pod (topology penalty 1.25 there, so a fifth of its working
time is lost to the spread), preempted by serving work, restarted from its checkpoint, then caught
by a node failure."""

from __future__ import annotations

import pytest
from django.db.models import Sum

from scheduling.cycle.failures import node_kill
from scheduling.models import JobUsage, Node, SchedulerEvent, UsageSample
from tenants.models import FleetPolicy
from tests.scheduling.conftest import Fleet

PARTS = ("lost_restore_gpu_s", "lost_topology_gpu_s", "lost_evicted_gpu_s", "lost_failed_gpu_s")
FIGURES = ("allocated_gpu_s", "useful_gpu_s", "lost_gpu_s", *PARTS)


def _scenario(fleet: Fleet) -> None:
    """One-minute ticks from fleet time 0. The gang starts at 60 s; serving work arrives at 1200 s
    and takes its GPUs at 1260 s; it runs again from 1920 s; its first node dies at 2400 s (the
    gang is evicted at the next tick, 2460 s) and it starts again at 2520 s; the ledger ends at
    3000 s."""
    FleetPolicy.objects.update(topology_penalty_pod=1.25)
    gang = fleet.submit(gpus=24, duration_s=10 * 3600.0, checkpoint_interval_s=600.0, checkpoint_gb=600.0, name="gang")
    for _ in range(20):
        fleet.tick()
    fleet.submit(gpus=16, kind="serving", priority_class_id=fleet.serving.pk, name="api", duration_s=600.0)
    for _ in range(20):
        fleet.tick()
    node = Node.objects.filter(allocations__job=gang).order_by("name").first()
    assert node is not None
    node_kill(node=node, sim_now_s=2400.0)
    for _ in range(10):
        fleet.tick()


def _job(name: str) -> dict[str, float]:
    return JobUsage.objects.filter(job__name=name).aggregate(**{f: Sum(f) for f in FIGURES})


def test_lost_splits_into_restore_topology_and_work_rolled_back_by_evictions_and_by_failures(fleet: Fleet) -> None:
    _scenario(fleet)
    events = list(SchedulerEvent.objects.filter(job__name="gang").order_by("id").values_list("sim_time_s", "message"))
    assert [(t, m.split(",")[0]) for t, m in events if "Evicted" in m or "Preempted" in m] == [
        (1260.0, "Preempted by job 2"),
        (2460.0, "Evicted by node failure on node pod-a-r1-n1"),
    ]
    assert sum("restoring checkpoint for 16 s" in m for _, m in events) == 2

    gang = _job("gang")
    # Held 24 GPUs for 1200 s, then 540 s, then 480 s.
    assert gang["allocated_gpu_s"] == pytest.approx(24 * (1200 + 540 + 480))
    # Two restarts read the checkpoint back for 16 s each.
    assert gang["lost_restore_gpu_s"] == pytest.approx(24 * 16 * 2)
    # A fifth of the working time: 1200 s, 540 - 16 s and 480 - 16 s.
    assert gang["lost_topology_gpu_s"] == pytest.approx(24 * (1200 + 524 + 464) * 0.2)
    # Preempted at 960 s of work (1200 s at 1/1.25), back to its checkpoint at 600 s.
    assert gang["lost_evicted_gpu_s"] == pytest.approx(24 * (960 - 600))
    # Stalled when its node died, at 600 + 464 / 1.25 s of work, back to 600 s.
    assert gang["lost_failed_gpu_s"] == pytest.approx(24 * 464 / 1.25)
    assert gang["lost_gpu_s"] == pytest.approx(sum(gang[part] for part in PARTS))
    assert gang["useful_gpu_s"] + gang["lost_gpu_s"] == pytest.approx(gang["allocated_gpu_s"])

    api = _job("api")
    # The serving job waited 60 s for the preempted gang's GPUs before it computed: restore time.
    assert api["lost_restore_gpu_s"] == pytest.approx(16 * 60)
    assert api["lost_gpu_s"] == pytest.approx(16 * 60)


def test_every_ledger_row_splits_its_lost_exactly(fleet: Fleet) -> None:
    _scenario(fleet)

    rows = [*UsageSample.objects.values(*FIGURES), *JobUsage.objects.values(*FIGURES)]
    assert rows
    for row in rows:
        assert row["lost_gpu_s"] == pytest.approx(sum(row[part] for part in PARTS), abs=1e-6)
        assert min(row[part] for part in PARTS) >= -1e-9
    per_team = UsageSample.objects.aggregate(**{f: Sum(f) for f in FIGURES})
    per_job = JobUsage.objects.aggregate(**{f: Sum(f) for f in FIGURES})
    assert per_job == pytest.approx(per_team)
