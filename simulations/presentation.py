"""The results table: every key of the simulator's metrics contract, the replayed policy beside
the current one, and which way each difference goes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# Keys where more is better; for the rest (times, losses, violations) less is better, and for a
# few (counts that describe the input, wall time) neither.
HIGHER_IS_BETTER = {
    "utilisation",
    "goodput",
    "limit_ratio",
    "jain_fairness",
    "topology_optimal_fraction",
    "serving_slo_attainment",
    "events_per_s",
}
NEUTRAL = {"policy", "capacity_gpus", "jobs", "window_s", "offered_load", "sim_wall_s", "events_per_s"}


@dataclass(frozen=True, slots=True)
class MetricRow:
    key: str
    candidate: Any
    current: Any
    difference: float | None
    verdict: str  # "better", "worse" or ""


def _verdict(key: str, difference: float | None) -> str:
    if difference is None or difference == 0 or key in NEUTRAL:
        return ""
    better = difference > 0 if key in HIGHER_IS_BETTER else difference < 0
    return "better" if better else "worse"


def metric_rows(results: dict[str, Any] | None) -> list[MetricRow]:
    if not results:
        return []
    candidate, current = results.get("candidate") or {}, results.get("current") or {}
    rows = []
    for key in candidate:
        if key == "policy":
            continue
        a, b = candidate.get(key), current.get(key)
        difference = None
        if isinstance(a, int | float) and isinstance(b, int | float) and not isinstance(a, bool):
            difference = a - b
        rows.append(MetricRow(key, a, b, difference, _verdict(key, difference)))
    return rows
