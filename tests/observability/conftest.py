"""A known fleet for the /metrics tests: every figure below is what the series must say."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
import redis
from django.conf import settings
from django.test import Client
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from scheduling.live.cycle_timings import CYCLE_TIMINGS_KEY, cycle_timings_record
from scheduling.live.waits import WAITS_KEY, WAITS_VERSION_KEY
from scheduling.models import Allocation, FleetClock, Incident, Job, Node, SchedulerEvent, UsageSample
from tests.factories import (
    AcceleratorTypeFactory,
    NodeFactory,
    PriorityClassFactory,
    QuotaFactory,
    RackFactory,
    TeamFactory,
)


def redis_client() -> redis.Redis:
    return redis.Redis.from_url(settings.REDIS_URL)


@pytest.fixture
def known_fleet(db: None) -> dict[str, Any]:
    """Two H100 nodes up and one down, one A100 node; team alpha runs 8 training GPUs, all of its
    guarantee, and waits with two jobs, team beta (no guarantee) runs 4 serving GPUs on borrowed
    quota and waits with one."""
    redis_client().delete(CYCLE_TIMINGS_KEY, WAITS_KEY, WAITS_VERSION_KEY)
    h100, a100 = AcceleratorTypeFactory(name="H100"), AcceleratorTypeFactory(name="A100")
    rack = RackFactory()
    n1 = NodeFactory(rack=rack, accelerator_type=h100, allocated_gpus=8)
    n2 = NodeFactory(rack=rack, accelerator_type=h100, allocated_gpus=4)
    NodeFactory(rack=rack, accelerator_type=h100, state=Node.State.DOWN, healthy_gpus=0)
    NodeFactory(rack=rack, accelerator_type=a100, gpus=4, healthy_gpus=4)
    alpha, beta = TeamFactory(slug="alpha"), TeamFactory(slug="beta")
    QuotaFactory(team=alpha, accelerator_type=h100, guaranteed=8)
    training = PriorityClassFactory(name="training", kind="training")
    common = {"priority_class": training, "accelerator_type": h100, "duration_s": 3600.0, "submit_s": 0.0}
    running = {"state": Job.State.RUNNING, "started_s": 0.0, "anchor_s": 0.0}
    run_a = Job.objects.create(team=alpha, name="a", gpus=8, **running, **common)
    run_b = Job.objects.create(team=beta, name="b", gpus=4, kind="serving", borrowing=True, **running, **common)
    Allocation.objects.create(job=run_a, node=n1, gpus=8)
    Allocation.objects.create(job=run_b, node=n2, gpus=4)
    wait_a1 = Job.objects.create(team=alpha, name="a1", gpus=16, **common)
    wait_a2 = Job.objects.create(team=alpha, name="a2", gpus=8, **common)
    wait_b = Job.objects.create(team=beta, name="b1", gpus=8, **common)
    Job.objects.create(team=beta, name="done", gpus=8, state=Job.State.COMPLETED, **common)
    # The latest cycle saw two of them; a2 was submitted since.
    document = {str(wait_a1.pk): ["quota", None, None], str(wait_b.pk): [f"reserved-for:{wait_a1.pk}", 900, None]}
    redis_client().set(WAITS_KEY, json.dumps(document))
    assert wait_a2.pk
    for team, kind, message in [
        (alpha, "started", "Started"),
        (alpha, "started", "Started"),
        (beta, "started", "Started"),
        (beta, "evicted", "Evicted (preempted); 0.5 GPU-h rolled back to checkpoint"),
        (alpha, "evicted", "Evicted (node-failed); 1.0 GPU-h rolled back to checkpoint"),
        (alpha, "completed", "Completed"),
    ]:
        SchedulerEvent.objects.create(team=team, kind=kind, sim_time_s=10.0, message=message)
    Incident.objects.create(
        node=n1, kind="dead", failed_at=100.0, detected_at=130.0, resumed_at=1000.0, lost_gpu_s=7200.0
    )
    Incident.objects.create(node=n2, kind="slow", failed_at=0.0)
    now = timezone.now()
    UsageSample.objects.create(
        sim_time_s=60.0,
        interval_s=60.0,
        recorded_at=now,
        team=alpha,
        accelerator_type=h100,
        kind="training",
        lost_gpu_s=5400.0,
    )
    FleetClock.objects.update_or_create(
        pk=1, defaults={"sim_now_s": 5000.0, "ticks": 42, "wall_updated_at": now - timedelta(seconds=5)}
    )
    cycle_timings_record(client=redis_client(), timings_ms={"engine": 3.0, "total": 40.0})
    cycle_timings_record(client=redis_client(), timings_ms={"engine": 20.0, "total": 700.0})
    return {"alpha": alpha, "beta": beta}


Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(client: Client, **extra: Any) -> Samples:
    response = client.get("/metrics", **extra)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain; version=")
    samples = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples
