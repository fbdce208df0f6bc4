"""`sjf-oracle`: shortest true duration first over the whole queue, ignoring quotas: the unfair bound."""

from __future__ import annotations

import pytest

from scheduling.engine import Quota
from scheduling.sim.fleet import QuotaSpec, parse_fleet
from scheduling.sim.runner import POLICIES, compare_policies
from scheduling.sim.trace import TraceJob

# One 8-GPU node, busy until 1000 s; then three jobs wait, submitted together, longest first.
WAITING = [
    TraceJob("l", 0.0, 1000.0, 8, "alpha"),
    TraceJob("a", 1.0, 500.0, 8, "alpha"),
    TraceJob("b", 1.0, 100.0, 8, "alpha"),
    TraceJob("c", 1.0, 50.0, 4, "alpha"),
    TraceJob("z", 3000.0, 1.0, 1, "alpha"),
]


def _jct(trace: list[TraceJob], policy: str, **options: object) -> dict[str, float]:
    comparison = compare_policies(trace, parse_fleet("1x1x1x8"), [policy], **options)  # type: ignore[arg-type]
    return comparison.results[0].jct_by_job


def test_the_oracle_runs_the_shortest_job_first_where_easy_keeps_submit_order() -> None:
    assert _jct(WAITING, "sjf-oracle") == pytest.approx({"l": 1000, "c": 1049, "b": 1149, "a": 1649, "z": 1})
    assert _jct(WAITING, "easy") == pytest.approx({"l": 1000, "a": 1499, "b": 1599, "c": 1649, "z": 1})


def test_the_oracle_orders_by_true_duration_not_by_the_users_time_limit() -> None:
    trace = [
        TraceJob("l", 0.0, 1000.0, 8, "alpha"),
        TraceJob("long-but-modest-limit", 1.0, 500.0, 8, "alpha", time_limit_s=600.0),
        TraceJob("short-but-generous-limit", 2.0, 10.0, 8, "alpha", time_limit_s=5000.0),
        TraceJob("z", 3000.0, 1.0, 1, "alpha"),
    ]
    jct = _jct(trace, "sjf-oracle")
    assert jct["short-but-generous-limit"] == pytest.approx(1008)
    assert jct["long-but-modest-limit"] == pytest.approx(1509)


def test_the_oracle_ignores_quotas_but_its_guarantee_violations_are_still_measured() -> None:
    # beta may not run at all under its quota (no guarantee, no borrowing) and alpha is guaranteed
    # the node; the oracle starts beta's long job first and alpha waits for it.
    trace = [
        TraceJob("b", 0.0, 1000.0, 8, "beta"),
        TraceJob("a", 10.0, 100.0, 8, "alpha"),
        TraceJob("z", 3000.0, 1.0, 1, "alpha"),
    ]
    quotas = QuotaSpec((Quota("alpha", "gpu", 8, 0), Quota("beta", "gpu", 0, 0)), ())
    comparison = compare_policies(trace, parse_fleet("1x1x1x8"), ["fleetline", "sjf-oracle"], quotas=quotas)
    fleetline, oracle = (result.metrics for result in comparison.results)
    assert fleetline["unfinished"] == 1 and fleetline["guarantee_violation_gpu_hours"] == 0
    assert oracle["unfinished"] == 0
    assert oracle["guarantee_violation_gpu_hours"] == pytest.approx(8 * (1000 - 10 - 300) / 3600)


def test_the_oracle_is_a_policy_the_command_line_offers() -> None:
    assert "sjf-oracle" in POLICIES
