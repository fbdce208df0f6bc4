"""The metric formulas of DESIGN.md "Simulator metrics", as small pure functions.

Percentiles interpolate linearly between closest ranks (numpy's default): p of n sorted values
sits at position p/100 x (n - 1).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

SLOWDOWN_BOUND_S = 10.0
GUARANTEE_GRACE_S = 300.0
ESTIMATE_FLOOR_S = 60.0


def percentile(values: Sequence[float], p: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    position = (len(ordered) - 1) * p / 100.0
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def ratio(numerator: float, denominator: float) -> float | None:
    return numerator / denominator if denominator > 0 else None


def bounded_slowdown(jct_s: float, duration_s: float) -> float:
    """JCT / max(duration, 10 s), exactly as the contract defines it."""
    return jct_s / max(duration_s, SLOWDOWN_BOUND_S)


def estimate_error(actual_wait_s: float, estimated_wait_s: float) -> float:
    """Actual wait / estimated wait, each floored at `ESTIMATE_FLOOR_S` (one cycle interval):
    1.0 is a perfect estimate, above 1 the job waited longer than it was told."""
    return max(actual_wait_s, ESTIMATE_FLOOR_S) / max(estimated_wait_s, ESTIMATE_FLOOR_S)


def limit_ratio(goodput: float | None, offered_load: float | None) -> float | None:
    """goodput / min(1, offered_load): 1.0 is the physical limit."""
    if goodput is None or not offered_load:
        return None
    return goodput / min(1.0, offered_load)


def offered_gpu_s(jobs: Sequence[tuple[float, float, int]], window_end_s: float) -> float:
    """Sum of gpus x min(duration, window end - submit) over (submit_s, duration_s, gpus)."""
    return sum(gpus * max(0.0, min(duration, window_end_s - submit)) for submit, duration, gpus in jobs)


def jain_index(shares: Sequence[float]) -> float | None:
    """(sum x)^2 / (n sum x^2): 1.0 when every team got the same fraction of its entitlement."""
    if not shares:
        return None
    squares = sum(x * x for x in shares)
    if squares == 0:
        return 1.0
    return sum(shares) ** 2 / (len(shares) * squares)


def water_fill(capacity: float, demands: Mapping[str, float], weights: Mapping[str, float]) -> dict[str, float]:
    """Max-min fair entitlements: capacity split by weight among demanding teams, each capped at
    its demand, with what a capped team leaves over split again among the rest."""
    return water_fill_with_bounds(capacity, demands, weights)[0]


def water_fill_with_bounds(
    capacity: float, demands: Mapping[str, float], weights: Mapping[str, float]
) -> tuple[dict[str, float], dict[str, float]]:
    """`water_fill`, and for each demanding team it never capped, the bound its demand stayed
    above: the largest share (with the tolerance) it was compared with. Until a team is capped its
    entitlement is 0 in every comparison, so a team whose demand moves and stays above its bound is
    still never capped, every round goes as before, and the entitlements are the same to the bit."""
    entitled = {team: 0.0 for team in demands}
    active = {team for team, demand in demands.items() if demand > 0}
    bounds = dict.fromkeys(active, 0.0)
    left = float(capacity)
    while active and left > 1e-9:
        total_weight = sum(weights.get(team, 1.0) for team in active)
        if total_weight <= 0:
            total_weight, equal = float(len(active)), True
        else:
            equal = False
        capped = set()
        for team in active:
            share = left * (1.0 if equal else weights.get(team, 1.0)) / total_weight
            limit = share + 1e-9
            if demands[team] - entitled[team] <= limit:
                capped.add(team)
            elif limit > bounds[team]:
                bounds[team] = limit
        if not capped:
            for team in active:
                entitled[team] += left * (1.0 if equal else weights.get(team, 1.0)) / total_weight
            break
        for team in capped:
            grant = demands[team] - entitled[team]
            entitled[team] = demands[team]
            left -= grant
            del bounds[team]
        active -= capped
    return entitled, bounds


class ViolationMeter:
    """Counts unmet demand within a team's unused guarantee once an episode of it has lasted
    more than `grace_s`; fed interval by interval with the unmet GPUs over that interval."""

    __slots__ = ("grace_s", "episode_start", "gpu_s")

    def __init__(self, grace_s: float = GUARANTEE_GRACE_S) -> None:
        self.grace_s = grace_s
        self.episode_start: float | None = None
        self.gpu_s = 0.0

    def add(self, start_s: float, end_s: float, unmet_gpus: float) -> None:
        if unmet_gpus <= 0:
            self.episode_start = None
            return
        if self.episode_start is None:
            self.episode_start = start_s
        counted_from = max(start_s, self.episode_start + self.grace_s)
        if end_s > counted_from:
            self.gpu_s += unmet_gpus * (end_s - counted_from)


def fitting_demand(pending_sizes: Mapping[int, int], unused_gpus: int) -> int:
    """Guarantee demand that fits as whole jobs: of a team's pending jobs (size -> count), the GPUs
    of those whose whole size fits within its unused guarantee, at most that guarantee. A gang
    bigger than what is left of the guarantee is not a guarantee the scheduler failed to honour:
    starting it would borrow, and no reclaim within the guarantee could serve it."""
    fitting = sum(size * count for size, count in pending_sizes.items() if 0 < size <= unused_gpus)
    return min(fitting, max(0, unused_gpus))


def guarantee_violation_gpu_s(
    steps: Sequence[tuple[float, float]], end_s: float, grace_s: float = GUARANTEE_GRACE_S
) -> float:
    """The ViolationMeter over `steps` of (time, unmet GPUs from then on) up to `end_s`."""
    meter = ViolationMeter(grace_s)
    for index, (time_s, unmet) in enumerate(steps):
        until = steps[index + 1][0] if index + 1 < len(steps) else end_s
        meter.add(time_s, until, unmet)
    return meter.gpu_s
