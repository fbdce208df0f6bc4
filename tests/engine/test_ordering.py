from __future__ import annotations

import pytest

from scheduling.engine import Policy
from scheduling.engine.ordering import order_jobs

from .builders import Scenario, fleet, job, quota, started


def _ids(jobs: list) -> list[str]:
    return [j.id for j in jobs]


def test_a_higher_priority_job_goes_first_whatever_its_submit_time() -> None:
    plan = (
        Scenario(fleet("1x1x1x8")).pending(job("early", 8, submit_s=0), job("urgent", 8, priority=5, submit_s=9)).plan()
    )

    assert set(started(plan)) == {"urgent"}


def test_within_a_priority_the_team_with_less_usage_per_entitlement_goes_first() -> None:
    scenario = Scenario(fleet("1x1x1x8")).quotas(quota("alpha", 8), quota("beta", 8)).usage(alpha=1000.0, beta=10.0)
    plan = scenario.pending(job("a", 8, team="alpha"), job("b", 8, team="beta", submit_s=5)).plan()

    assert set(started(plan)) == {"b"}


def test_a_larger_entitlement_makes_the_same_usage_weigh_less() -> None:
    scenario = Scenario(fleet("1x1x1x8")).quotas(quota("alpha", 64), quota("beta", 8)).usage(alpha=100.0, beta=100.0)
    plan = scenario.pending(job("a", 8, team="alpha", submit_s=5), job("b", 8, team="beta")).plan()

    assert set(started(plan)) == {"a"}


@pytest.mark.parametrize(
    ("order", "expected"),
    [
        ("submit", ["old", "short", "fresh"]),
        ("shortest_limit", ["short", "fresh", "old"]),
        ("las", ["fresh", "short", "old"]),
    ],
)
def test_the_within_team_order_follows_policy(order: str, expected: list[str]) -> None:
    jobs = [
        job("old", submit_s=0, time_limit_s=900.0, attained_gpu_s=500.0),
        job("short", submit_s=1, time_limit_s=10.0, attained_gpu_s=100.0),
        job("fresh", submit_s=2, time_limit_s=100.0),
    ]

    assert _ids(order_jobs(jobs, Policy(within_team_order=order), {})) == expected


def test_ties_are_broken_by_job_id() -> None:
    jobs = [job("b"), job("c"), job("a")]

    assert _ids(order_jobs(jobs, Policy(), {})) == ["a", "b", "c"]
