"""A small modelled fleet and a way to run cycles on it with a controlled wall clock."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest
from django.test import TestCase

from scheduling.cycle.tick import TickResult, cycle_tick
from scheduling.models import AcceleratorType, Job, Node, Pod, Rack
from scheduling.services.jobs import JobSpec, job_submit
from tenants.models import PriorityClass, Team
from tests.factories import (
    AcceleratorTypeFactory,
    FleetPolicyFactory,
    PriorityClassFactory,
    QuotaFactory,
    TeamFactory,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)


@dataclass
class Fleet:
    """1 pod x 2 racks x 2 nodes x 8 GPUs of H100, one team guaranteed half of it."""

    accelerator: AcceleratorType
    nodes: list[Node]
    team: Team
    training: PriorityClass
    serving: PriorityClass
    token: int = 0
    wall_s: float = 0.0
    ticks: list[TickResult | None] = field(default_factory=list)

    def submit(self, *, gpus: int, duration_s: float = 3600.0, team: Team | None = None, **extra: object) -> Job:
        spec = JobSpec(
            name=extra.pop("name", f"job-{gpus}"),  # type: ignore[arg-type]
            kind=extra.pop("kind", "training"),  # type: ignore[arg-type]
            priority_class_id=extra.pop("priority_class_id", self.training.pk),  # type: ignore[arg-type]
            accelerator_type_id=self.accelerator.pk,
            gpus=gpus,
            duration_s=duration_s,
            **extra,  # type: ignore[arg-type]
        )
        return job_submit(team=team or self.team, spec=spec, user=None)

    def tick(self, wall_step_s: float = 1.0, speed: float = 60.0) -> TickResult | None:
        """One cycle, ``wall_step_s`` of wall time after the previous one."""
        self.token += 1
        self.wall_s += wall_step_s
        # Run what the tick defers to after commit (publishing, pending reasons) here too, also in
        # tests that wrap everything in one transaction.
        with TestCase.captureOnCommitCallbacks(execute=True):
            result = cycle_tick(token=self.token, wall_now=T0 + timedelta(seconds=self.wall_s), speed=speed)
        self.ticks.append(result)
        return result


def build_fleet(racks: int = 2, nodes_per_rack: int = 2) -> Fleet:
    accelerator = AcceleratorTypeFactory(name="H100")
    pod = Pod.objects.create(name="pod-a")
    nodes = []
    for r in range(racks):
        rack = Rack.objects.create(pod=pod, name=f"pod-a-r{r + 1}")
        for n in range(nodes_per_rack):
            nodes.append(Node.objects.create(rack=rack, name=f"{rack.name}-n{n + 1}", accelerator_type=accelerator))
    team = TeamFactory(name="Language Models", slug="language-models")
    QuotaFactory(team=team, accelerator_type=accelerator, guaranteed=racks * nodes_per_rack * 4, borrow_limit=64)
    FleetPolicyFactory(preemption_grace_s=60.0)
    training = PriorityClassFactory(name="training", value=300, kind="training", preemptible=True)
    serving = PriorityClassFactory(name="serving", value=900, kind="serving", preemptible=False, may_preempt=True)
    fleet = Fleet(accelerator, nodes, team, training, serving)
    fleet.tick()  # the first tick only starts the clock
    return fleet


@pytest.fixture
def fleet(db: None) -> Fleet:
    return build_fleet()
