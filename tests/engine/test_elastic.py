from __future__ import annotations

from scheduling.engine import Grow

from .builders import Scenario, fleet, job, running, started


def test_an_elastic_job_starts_smaller_when_its_full_size_does_not_fit() -> None:
    scenario = Scenario(fleet("1x1x1x8")).with_running(running(job("r", 4), on="p0-r0-n0"))
    plan = scenario.pending(job("e", 8, min_gpus=2, max_gpus=8)).plan()

    assert started(plan) == {"e": (("p0-r0-n0", 4),)}


def test_an_elastic_job_below_its_minimum_does_not_start() -> None:
    scenario = Scenario(fleet("1x1x1x8")).with_running(running(job("r", 7), on="p0-r0-n0"))
    plan = scenario.pending(job("e", 8, min_gpus=2, max_gpus=8)).plan()

    assert started(plan) == {}


def test_an_elastic_job_grows_into_capacity_nothing_pending_can_use() -> None:
    scenario = Scenario(fleet("1x1x1x8")).with_running(running(job("e", 4, min_gpus=2, max_gpus=8), on="p0-r0-n0"))
    plan = scenario.plan()

    assert plan.of_type(Grow) == (Grow("e", (("p0-r0-n0", 8),), 8, True),)


def test_an_elastic_job_does_not_grow_while_a_job_waits_for_the_same_accelerator() -> None:
    scenario = Scenario(fleet("1x1x2x8")).with_running(
        running(job("e", 4, min_gpus=2, max_gpus=8), on="p0-r0-n0"),
        running(job("r", 8), on="p0-r0-n1"),
    )
    plan = scenario.pending(job("gang", 16)).plan()

    assert plan.of_type(Grow) == ()


def test_elastic_growth_is_off_when_policy_says_so() -> None:
    scenario = Scenario(fleet("1x1x1x8")).with_running(running(job("e", 4, min_gpus=2, max_gpus=8), on="p0-r0-n0"))

    assert scenario.policy(elastic=False).plan().of_type(Grow) == ()
