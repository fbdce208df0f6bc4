"""How each of the simulator's metrics reads to a person: one declaration per key of
`metrics.build_metrics` (the contract of DESIGN.md and the keys beyond it), with a human name, the
unit it is shown in, which way is better and how far it is rounded.

Every place that shows a comparison of two replays derives its rows from here (the what-if page,
`simulations.presentation`), so a metric has one direction wherever it appears: utilisation and
training utilisation are both "higher is better". Counters (jobs, cycles, events, preemptions,
failures) and facts about the input or the machine (capacity, window, offered load, wall time)
describe a replay and get no verdict. Values are compared as shown: a difference that rounds to
nothing is no difference.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class Direction(StrEnum):
    HIGHER = "higher is better"
    LOWER = "lower is better"
    NEAR_ONE = "closer to 1 is better"
    NONE = "no verdict"


class Verdict(StrEnum):
    BETTER = "better"
    WORSE = "worse"
    NONE = ""


MINUS = "\u2212"  # the minus sign, as a reader expects it (not a hyphen)


@dataclass(frozen=True, slots=True)
class MetricInfo:
    """`scale` turns the stored value into the shown one (a fraction 0.42 -> 42 %, 7,200 s -> 2 h);
    `digits` is how many decimals the shown value keeps."""

    key: str
    label: str
    unit: str
    direction: Direction
    digits: int
    scale: float = 1.0
    group: str = ""

    @property
    def title(self) -> str:
        """The name with its unit: "Utilisation, %"."""
        return f"{self.label}, {self.unit}" if self.unit else self.label

    def shown(self, value: Any) -> float | None:
        """The number a reader sees (scaled and rounded); None for no number."""
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            return None
        rounded = round(value * self.scale, self.digits)
        return rounded + 0.0 if rounded != 0 else 0.0  # never "-0.0"

    def text(self, value: Any) -> str:
        """The value as shown: rounded, thousands separated; text as it is; "—" for nothing."""
        if isinstance(value, str):
            return value
        number = self.shown(value)
        if number is None:
            return "—"
        return f"{number:,.{self.digits}f}".replace("-", MINUS)

    def difference(self, candidate: Any, current: Any) -> float | None:
        """Candidate minus current, as shown (rounded to the shown decimals)."""
        a, b = self.shown(candidate), self.shown(current)
        if a is None or b is None:
            return None
        return self._round(a - b)

    def difference_text(self, candidate: Any, current: Any) -> str:
        difference = self.difference(candidate, current)
        if difference is None:
            return ""
        sign = "+" if difference > 0 else MINUS if difference < 0 else ""
        return f"{sign}{abs(difference):,.{self.digits}f}"

    def verdict(self, candidate: Any, current: Any) -> Verdict:
        """Better or worse for the candidate, by the shown values; none for counters, facts and
        differences that round to nothing."""
        a, b = self.shown(candidate), self.shown(current)
        if a is None or b is None or a == b or self.direction is Direction.NONE:
            return Verdict.NONE
        if self.direction is Direction.NEAR_ONE:
            one = self._round(self.scale)
            gap_a, gap_b = self._round(abs(a - one)), self._round(abs(b - one))
            if gap_a == gap_b:
                return Verdict.NONE
            return Verdict.BETTER if gap_a < gap_b else Verdict.WORSE
        higher = a > b
        return Verdict.BETTER if higher == (self.direction is Direction.HIGHER) else Verdict.WORSE

    def _round(self, number: float) -> float:
        rounded = round(number, self.digits)
        return rounded + 0.0 if rounded != 0 else 0.0


HOUR, MINUTE, PERCENT = 1 / 3600.0, 1 / 60.0, 100.0

# Groups, in the order a page shows them.
THROUGHPUT = "Use of the fleet"
TIMES = "Job times"
FAIRNESS = "Fairness and guarantees"
PLACEMENT = "Placement"
PREEMPTION = "Preemption"
FAILURES = "Failures"
SERVING = "Serving and training"
ESTIMATES = "Start estimates"
OUTCOMES = "Jobs"
REPLAY = "The replay"

_H, _L, _N, _ONE = Direction.HIGHER, Direction.LOWER, Direction.NONE, Direction.NEAR_ONE

CATALOGUE: tuple[MetricInfo, ...] = (
    MetricInfo("utilisation", "Utilisation", "%", _H, 1, PERCENT, THROUGHPUT),
    MetricInfo("goodput", "Goodput", "%", _H, 1, PERCENT, THROUGHPUT),
    MetricInfo("limit_ratio", "Goodput over the most that could run", "", _H, 3, 1.0, THROUGHPUT),
    MetricInfo("offered_load", "Offered load", "%", _N, 1, PERCENT, THROUGHPUT),
    MetricInfo("fragmentation_idle_fraction", "Idle while a gang fit only by count", "%", _L, 2, PERCENT, THROUGHPUT),
    MetricInfo("jct_mean_s", "Job completion time, mean", "h", _L, 2, HOUR, TIMES),
    MetricInfo("jct_p50_s", "Job completion time, median", "h", _L, 2, HOUR, TIMES),
    MetricInfo("jct_p95_s", "Job completion time, 95th percentile", "h", _L, 2, HOUR, TIMES),
    MetricInfo("jct_p99_s", "Job completion time, 99th percentile", "h", _L, 2, HOUR, TIMES),
    MetricInfo("wait_mean_s", "Wait before starting, mean", "min", _L, 1, MINUTE, TIMES),
    MetricInfo("wait_p99_s", "Wait before starting, 99th percentile", "min", _L, 1, MINUTE, TIMES),
    MetricInfo("bounded_slowdown_mean", "Slowdown (time taken over work), mean", "×", _L, 2, 1.0, TIMES),
    MetricInfo("jain_fairness", "Fairness between teams (Jain's index)", "", _H, 3, 1.0, FAIRNESS),
    MetricInfo("guarantee_violation_gpu_hours", "Guarantees not honoured", "GPU-h", _L, 1, 1.0, FAIRNESS),
    MetricInfo(
        "guarantee_violation_fit_gpu_hours", "Guarantees not honoured, whole jobs", "GPU-h", _L, 1, 1.0, FAIRNESS
    ),
    MetricInfo("topology_optimal_fraction", "Gangs placed as narrowly as possible", "%", _H, 1, PERCENT, PLACEMENT),
    MetricInfo("racks_per_multinode_job_mean", "Racks per multi-node job, mean", "", _L, 2, 1.0, PLACEMENT),
    MetricInfo("preemptions", "Preemptions", "", _N, 0, 1.0, PREEMPTION),
    MetricInfo("preemption_lost_gpu_hours", "Work lost to preemption", "GPU-h", _L, 1, 1.0, PREEMPTION),
    MetricInfo("failures", "Node failures", "", _N, 0, 1.0, FAILURES),
    MetricInfo("mttd_mean_s", "Time to detect a failure, mean", "min", _L, 1, MINUTE, FAILURES),
    MetricInfo("mttr_mean_s", "Time to recover from a failure, mean", "min", _L, 1, MINUTE, FAILURES),
    MetricInfo("failure_lost_gpu_hours", "Work lost to failures", "GPU-h", _L, 1, 1.0, FAILURES),
    MetricInfo("serving_slo_attainment", "Serving demand met on time", "%", _H, 1, PERCENT, SERVING),
    MetricInfo("serving_start_p99_s", "Serving start, 99th percentile", "s", _L, 0, 1.0, SERVING),
    MetricInfo("serving_utilisation", "Serving utilisation", "%", _H, 1, PERCENT, SERVING),
    MetricInfo("training_utilisation", "Training utilisation", "%", _H, 1, PERCENT, SERVING),
    MetricInfo("serving_goodput", "Serving goodput", "%", _H, 1, PERCENT, SERVING),
    MetricInfo("training_goodput", "Training goodput", "%", _H, 1, PERCENT, SERVING),
    MetricInfo("training_preemptions_by_serving", "Training evictions by serving", "", _N, 0, 1.0, SERVING),
    MetricInfo("training_lost_gpu_hours_by_serving", "Training work lost to serving", "GPU-h", _L, 1, 1.0, SERVING),
    MetricInfo("estimate_error_p10", "Start estimate error, 10th percentile", "×", _ONE, 2, 1.0, ESTIMATES),
    MetricInfo("estimate_error_p50", "Start estimate error, median", "×", _ONE, 2, 1.0, ESTIMATES),
    MetricInfo("estimate_error_p90", "Start estimate error, 90th percentile", "×", _ONE, 2, 1.0, ESTIMATES),
    MetricInfo("estimate_jobs", "Jobs with an estimate to check", "", _N, 0, 1.0, ESTIMATES),
    MetricInfo("estimate_absent", "Jobs that waited without an estimate", "", _N, 0, 1.0, ESTIMATES),
    MetricInfo("estimate_sampled_every", "Estimates recorded for every nth job", "", _N, 0, 1.0, ESTIMATES),
    MetricInfo("estimate_within_range", "Starts within the range first shown", "%", _H, 1, PERCENT, ESTIMATES),
    MetricInfo("estimate_range_jobs", "Jobs with a range to check", "", _N, 0, 1.0, ESTIMATES),
    MetricInfo("estimate_range_width_p50", "Range width over the estimated wait, median", "×", _L, 2, 1.0, ESTIMATES),
    MetricInfo("estimate_range_high_p50", "Range high end over the estimated wait, median", "×", _N, 2, 1.0, ESTIMATES),
    MetricInfo("jobs", "Jobs replayed", "", _N, 0, 1.0, OUTCOMES),
    MetricInfo("completed", "Jobs completed", "", _N, 0, 1.0, OUTCOMES),
    MetricInfo("timed_out", "Jobs stopped at their time limit", "", _N, 0, 1.0, OUTCOMES),
    MetricInfo("unfinished", "Jobs that never finished", "", _N, 0, 1.0, OUTCOMES),
    MetricInfo("capacity_gpus", "Fleet capacity", "GPUs", _N, 0, 1.0, REPLAY),
    MetricInfo("window_s", "Submission window", "h", _N, 1, HOUR, REPLAY),
    MetricInfo("sim_end_s", "Replay ended after", "h", _N, 1, HOUR, REPLAY),
    MetricInfo("quotas", "Quotas", "", _N, 0, 1.0, REPLAY),
    MetricInfo("cycles", "Scheduling cycles", "", _N, 0, 1.0, REPLAY),
    MetricInfo("cycles_skipped", "Cycles skipped (nothing could change)", "", _N, 0, 1.0, REPLAY),
    MetricInfo("events", "Events simulated", "", _N, 0, 1.0, REPLAY),
    MetricInfo("sim_wall_s", "Wall time of the replay", "s", _N, 1, 1.0, REPLAY),
    MetricInfo("events_per_s", "Events simulated per second of wall time", "", _N, 0, 1.0, REPLAY),
)
METRICS: Mapping[str, MetricInfo] = {info.key: info for info in CATALOGUE}
# Keys of the metrics that name what was replayed rather than measure it.
LABEL_KEYS = frozenset({"policy"})


def metric_info(key: str) -> MetricInfo:
    """The declaration of `key`; a key stored by an older or newer simulator that has none reads as
    its words, with no verdict."""
    known = METRICS.get(key)
    if known is not None:
        return known
    return MetricInfo(key, key.replace("_", " ").capitalize(), "", Direction.NONE, 3, 1.0, REPLAY)
