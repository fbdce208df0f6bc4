"""Slurm-style fair share: decayed usage divided by entitlement, lower goes first."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from .model import Quota, Team


def entitlements(teams: Iterable[Team], quotas: Iterable[Quota]) -> dict[str, float]:
    """Entitlement = the team's guarantees over all accelerators times its fair-share weight.

    A team without guarantees is treated as entitled to one GPU, so that its share is still a
    finite, comparable number rather than a division by zero.
    """
    guaranteed: dict[str, int] = {}
    for quota in quotas:
        guaranteed[quota.team] = guaranteed.get(quota.team, 0) + max(0, quota.guaranteed)
    weights = {team.id: team.fairshare_weight for team in teams}
    result: dict[str, float] = {}
    for team_id in set(guaranteed) | set(weights):
        weight = max(weights.get(team_id, 1.0), 1e-9)
        result[team_id] = max(guaranteed.get(team_id, 0), 1) * weight
    return result


def fairshare_factors(
    usage: Iterable[tuple[str, float]],
    teams: Iterable[Team],
    quotas: Iterable[Quota],
) -> dict[str, float]:
    """Decayed usage / entitlement per team; teams absent from the map have used nothing."""
    entitled = entitlements(teams, quotas)
    return {team: max(0.0, used) / entitled.get(team, 1.0) for team, used in usage}


def fairshare_priorities(factors: Mapping[str, float]) -> dict[str, float]:
    """Slurm's classic fair-share factor, 2^(-U/S), from `fairshare_factors`: U/S is the team's
    usage per entitlement over the fleet's (here, the mean over teams), so 1.0 means nothing used,
    0.5 exactly its share, and heavier users tend to 0. Ordering by it (higher first) is ordering
    by the factor (lower first); unlike the factor it has a scale an age term can be added to."""
    if not factors:
        return {}
    mean = math.fsum(factors.values()) / len(factors)  # exact, so the same in any team order
    if mean <= 0.0:
        return {team: 1.0 for team in factors}
    return {team: math.pow(2.0, -factor / mean) for team, factor in factors.items()}


def decay_usage(usage_gpu_s: float, elapsed_s: float, half_life_s: float) -> float:
    """Usage after `elapsed_s` of exponential decay with the given half-life."""
    if half_life_s <= 0 or elapsed_s <= 0:
        return usage_gpu_s if half_life_s > 0 else 0.0
    return usage_gpu_s * math.pow(0.5, elapsed_s / half_life_s)


def decayed_totals(usage: Mapping[str, float], elapsed_s: float, half_life_s: float) -> dict[str, float]:
    return {team: decay_usage(used, elapsed_s, half_life_s) for team, used in usage.items()}
