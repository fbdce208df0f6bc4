"""The simulator's HTML report stays small however long the replay: each line holds at most
`MAX_POINTS` rounded points, and plotly.js is linked rather than inlined when asked."""

from __future__ import annotations

import json
import re

import pytest

from scheduling.sim.fleet import parse_fleet
from scheduling.sim.report import MAX_POINTS, build_figure, build_html, thin
from scheduling.sim.runner import Comparison, compare_policies
from scheduling.sim.trace import TraceJob

PLOTLY_JS = "/static/vendor/plotly/plotly.min.js"


@pytest.fixture(scope="module")
def comparison() -> Comparison:
    # Submissions over one day, work for two weeks: a line is sampled 400 times per submission
    # window, so the replay's tail brings thousands of samples.
    trace = [TraceJob(f"j{i}", i * 2880.0, 86400.0, 8, "ab"[i % 2]) for i in range(30)]
    return compare_policies(trace, parse_fleet("1x1x2x8"), ["easy", "fleetline"])


def test_a_long_replays_lines_are_thinned_and_rounded(comparison: Comparison) -> None:
    assert len(comparison.results[0].series.times_s) > 4 * MAX_POINTS
    figure = build_figure(comparison)
    for trace in figure.data:
        assert len(trace.x) <= MAX_POINTS
    text = json.dumps(figure.to_plotly_json()["data"])
    assert not re.search(r"\d\.\d{6,}", text), "a number longer than a chart can show"


def test_the_linked_report_is_a_few_kilobytes_and_the_self_contained_one_carries_plotly(
    comparison: Comparison,
) -> None:
    linked = build_html(comparison, plotly_js_url=PLOTLY_JS)
    assert f'src="{PLOTLY_JS}"' in linked
    assert len(linked.encode()) < 100_000
    assert len(build_html(comparison).encode()) > 3_000_000  # the CLI's file works offline


def test_thinning_averages_equal_buckets_and_keeps_short_lines() -> None:
    assert thin([0.0, 1.0], [5.0, 6.0], max_points=4) == ([0.0, 1.0], [5.0, 6.0])
    xs, ys = thin([float(i) for i in range(10)], [0.0, 2.0] * 5, max_points=5)
    assert xs == [0.0, 2.0, 4.0, 6.0, 8.0]
    assert ys == [1.0] * 5
    xs, ys = thin([float(i) for i in range(7)], [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 4.0], max_points=3)
    assert xs == [0.0, 3.0, 6.0] and ys == [1.0, 1.0, 4.0]
