"""Borrowed GPU-time: what a team holds beyond its guarantee, and which of its runs it is charged to.

At each instant a team borrows, per accelerator type, max(0, GPUs it holds - its guarantee); its
borrowed GPU-seconds in a tick are the integral of that over the tick. A run's `borrowing` flag says
how the run was admitted, not what its team borrows now: once other runs of the team end, the
flagged run sits within the guarantee they freed, so booking flagged runs whole overstates what was
borrowed (a team at or below its guarantee borrows nothing, whatever its runs' flags say).

The rule that apportions it: at each instant, the team's excess is charged first to its runs that
were admitted on borrowed quota, in proportion to their GPUs and at most all of them; what remains
goes to its other runs, in proportion to their GPUs. So a run is never charged more GPUs than it
holds (borrowed <= allocated on every run), and the runs' borrowed GPU-seconds sum to the team's.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from scheduling.engine.quota import borrowed_gpus

Group = tuple[int, str]  # team id, accelerator name


@dataclass(frozen=True, slots=True)
class Span:
    """One run's hold in the tick: `gpus` of its team's `group` from `from_s` to `to_s`."""

    group: Group
    gpus: int
    from_s: float
    to_s: float
    borrowing: bool


def borrowed_split(spans: Sequence[Span], guaranteed: Mapping[Group, int]) -> list[float]:
    """The borrowed GPU-seconds of each span, in the order given, by the rule in the module
    docstring. A group without a guarantee (no quota row) has a guarantee of 0."""
    members: dict[Group, list[int]] = defaultdict(list)
    for at, span in enumerate(spans):
        if span.to_s > span.from_s and span.gpus > 0:
            members[span.group].append(at)
    borrowed = [0.0] * len(spans)
    for group, indices in members.items():
        shares = _group_split([spans[i] for i in indices], max(0, guaranteed.get(group, 0)))
        for i, share in zip(indices, shares, strict=True):
            borrowed[i] = share
    return borrowed


def _group_split(spans: list[Span], guaranteed: int) -> list[float]:
    """One team's spans on one accelerator. The GPUs the team holds change only where a span starts
    or ends, so between two such times the excess is constant, and so is what each GPU of a flagged
    run, and each GPU of another run, is charged per second. Summing those rates over time once
    (`flagged_per_gpu`, `other_per_gpu`: borrowed seconds per GPU from the first time) charges each
    span its GPUs times the difference between its end and its start."""
    delta: dict[float, list[int]] = defaultdict(lambda: [0, 0])  # time -> change of [flagged, other] GPUs
    for span in spans:
        side = 0 if span.borrowing else 1
        delta[span.from_s][side] += span.gpus
        delta[span.to_s][side] -= span.gpus
    times = sorted(delta)
    flagged_per_gpu, other_per_gpu = {times[0]: 0.0}, {times[0]: 0.0}
    flagged = other = 0
    for now, upto in zip(times, times[1:], strict=False):
        flagged += delta[now][0]
        other += delta[now][1]
        excess = borrowed_gpus(flagged + other, guaranteed)
        from_flagged = min(excess, flagged)
        seconds = upto - now
        flagged_per_gpu[upto] = flagged_per_gpu[now] + (from_flagged / flagged * seconds if flagged else 0.0)
        other_per_gpu[upto] = other_per_gpu[now] + ((excess - from_flagged) / other * seconds if other else 0.0)
    shares = []
    for span in spans:
        per_gpu = flagged_per_gpu if span.borrowing else other_per_gpu
        shares.append(span.gpus * (per_gpu[span.to_s] - per_gpu[span.from_s]))
    return shares
