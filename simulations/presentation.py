"""The results table: every metric of the replayed policy beside the current one, by the simulator's
metric catalogue (`scheduling.sim.metric_catalogue`): its human name and unit, values rounded for
reading, and which way the difference goes (none for counters and facts about the replay)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from scheduling.sim.metric_catalogue import CATALOGUE, LABEL_KEYS, MetricInfo, metric_info

# Why the simulator left a job out (`scheduling.sim.workload`), as the page says it.
DROP_REASONS = {
    "larger-than-fleet": "larger than the fleet",
    "unknown-accelerator": "for an accelerator the fleet lacks",
}


@dataclass(frozen=True, slots=True)
class MetricRow:
    key: str
    title: str
    direction: str
    candidate: str
    current: str
    difference: str
    verdict: str  # "better", "worse" or ""


@dataclass(frozen=True, slots=True)
class MetricGroup:
    name: str
    rows: tuple[MetricRow, ...]


def metric_row(info: MetricInfo, candidate: Any, current: Any) -> MetricRow:
    return MetricRow(
        key=info.key,
        title=info.title,
        direction=info.direction.value,
        candidate=info.text(candidate),
        current=info.text(current),
        difference=info.difference_text(candidate, current),
        verdict=info.verdict(candidate, current).value,
    )


def metric_groups(results: dict[str, Any] | None) -> list[MetricGroup]:
    """The rows in the catalogue's order and groups; keys the catalogue does not know (stored by
    another version of the simulator) come last, under their own words."""
    if not results:
        return []
    candidate, current = results.get("candidate") or {}, results.get("current") or {}
    keys = [key for key in {**candidate, **current} if key not in LABEL_KEYS]
    ordered = [info for info in CATALOGUE if info.key in keys]
    known = {info.key for info in ordered}
    ordered += [metric_info(key) for key in keys if key not in known]
    groups: dict[str, list[MetricRow]] = {}
    for info in ordered:
        groups.setdefault(info.group, []).append(metric_row(info, candidate.get(info.key), current.get(info.key)))
    return [MetricGroup(name, tuple(rows)) for name, rows in groups.items()]


def dropped_text(results: dict[str, Any] | None) -> str:
    """The jobs left out of the replay, by reason: "3 larger than the fleet; 1 for an accelerator
    the fleet lacks"; empty when none were."""
    reasons = ((results or {}).get("meta") or {}).get("dropped_reasons") or {}
    return "; ".join(
        f"{count:,} {DROP_REASONS.get(reason, reason.replace('-', ' '))}" for reason, count in reasons.items()
    )
