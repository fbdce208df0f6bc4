"""The metric catalogue: every key a replay reports has a human name, a unit, one direction and a
rounding, and comparisons read the same way for every metric of a kind."""

from __future__ import annotations

import pytest

from scheduling.sim.fleet import parse_fleet
from scheduling.sim.metric_catalogue import CATALOGUE, LABEL_KEYS, METRICS, Direction, Verdict, metric_info
from scheduling.sim.runner import compare_policies
from scheduling.sim.trace import TraceJob


@pytest.fixture(scope="module")
def metrics() -> dict[str, object]:
    trace = [TraceJob(f"j{i}", i * 600.0, 1800.0 + 300 * i, 1 + i % 8, "ab"[i % 2]) for i in range(12)]
    return compare_policies(trace, parse_fleet("1x1x2x8"), ["easy"]).results[0].metrics


def test_every_key_a_replay_reports_is_declared_once(metrics: dict[str, object]) -> None:
    assert set(metrics) - LABEL_KEYS <= set(METRICS)
    assert len(METRICS) == len(CATALOGUE)
    assert all(info.label and info.label[0].isupper() and "_" not in info.label for info in CATALOGUE)


@pytest.mark.parametrize(
    ("key", "candidate", "current"),
    [("utilisation", 0.4000, 0.4028), ("training_utilisation", 0.4000, 0.4028), ("goodput", 0.4000, 0.4028)],
)
def test_less_of_any_utilisation_is_worse(key: str, candidate: float, current: float) -> None:
    info = METRICS[key]
    assert info.direction is Direction.HIGHER
    assert info.verdict(candidate, current) is Verdict.WORSE
    assert info.verdict(current, candidate) is Verdict.BETTER
    assert info.difference_text(candidate, current) == "\u22120.3"


@pytest.mark.parametrize(
    "key",
    ["jobs", "cycles", "cycles_skipped", "events", "completed", "preemptions", "failures", "capacity_gpus"],
)
def test_counters_and_facts_about_the_replay_get_no_verdict(key: str) -> None:
    info = METRICS[key]
    assert info.direction is Direction.NONE
    assert info.verdict(10, 20) is Verdict.NONE
    assert info.difference_text(10, 20) == "\u221210"


def test_values_are_rounded_for_reading() -> None:
    assert METRICS["utilisation"].text(0.04272817678130933) == "4.3"
    assert METRICS["jct_mean_s"].text(18439.884057971016) == "5.12"
    assert METRICS["wait_mean_s"].text(33.27536231884058) == "0.6"
    assert METRICS["events"].text(1234567) == "1,234,567"
    assert METRICS["jain_fairness"].text(None) == "—"
    assert METRICS["quotas"].text("given") == "given"


def test_a_difference_that_rounds_to_nothing_has_no_verdict_and_no_sign() -> None:
    info = METRICS["utilisation"]
    assert info.difference_text(0.40001, 0.40004) == "0.0"
    assert info.verdict(0.40001, 0.40004) is Verdict.NONE
    assert info.text(-0.00001) == "0.0"


def test_an_estimate_error_is_better_closer_to_one() -> None:
    info = METRICS["estimate_error_p50"]
    assert info.verdict(1.2, 2.0) is Verdict.BETTER
    assert info.verdict(0.5, 1.1) is Verdict.WORSE
    assert info.verdict(0.8, 1.2) is Verdict.NONE


def test_a_key_the_catalogue_does_not_know_reads_as_words_without_verdict() -> None:
    info = metric_info("queue_depth_p99")
    assert info.label == "Queue depth p99"
    assert info.verdict(1, 2) is Verdict.NONE
