"""The seeded failure model shared by the simulator and the live fleet (restore times: `progress`).

Three kinds of failure, each a Poisson process per node with its own rate:

- ``crash``: the node stops heartbeating; every job on it stalls until the detector declares it dead.
- ``gpu-loss``: the node keeps running with fewer healthy GPUs (a GPU fell off the bus, HBM errors);
  the gangs using it stall, and the node's next heartbeat carries the error (the XID), so the loss
  is found within a heartbeat interval (`detector.gpu_loss_detected_at`).
- ``slow``: heartbeats continue but step time is multiplied by a factor (thermal throttling, a bad
  link): the gang, synchronised every step, runs at the pace of its slowest member.

Default rates come from Meta's Llama 3 405B pre-training report (Dubey et al., 2024, "The Llama 3
Herd of Models", section 3.3.4): 419 unexpected interruptions in 54 days on 16,384 H100 GPUs, i.e.
2,048 nodes of 8 GPUs; about 78 % attributed to confirmed or suspected hardware. Exposure is
2,048 nodes x 54 days x 24 h = 2,654,208 node-hours, so the total is 419 / 2,654,208 =
1.58e-4 interruptions per node-hour (one per node every ~264 days; one somewhere in that fleet
every ~3.1 hours). The report's breakdown puts about 57 % on the GPU itself (faulty GPU 30.1 %,
HBM3 17.2 %, SRAM 4.5 %, GPU system processor 4.1 %, thermal/sensor 1.4 %): those are ``gpu-loss``
(239 events, 9.0e-5 per node-hour). The other 43 % (network switches and cables, host maintenance,
NICs, power, CPU, memory, software bugs, NCCL watchdog timeouts) take the node or its process down:
``crash`` (180 events, 6.8e-5 per node-hour). Stragglers are not interruptions and the report does
not count them; we assume a quarter of the interruption rate (4.0e-5 per node-hour) with slowdowns
uniform in 1.2x..3.0x. ``rate_scale`` multiplies every rate, so small fleets and short traces still
see failures in a benchmark.

Randomness comes only from the ``random.Random`` the caller passes in (typed as `Rng`, so the
engine itself never imports ``random``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

LLAMA3_INTERRUPTIONS = 419
LLAMA3_NODE_HOURS = 2048 * 54 * 24.0
INTERRUPTIONS_PER_NODE_H = LLAMA3_INTERRUPTIONS / LLAMA3_NODE_HOURS
GPU_SHARE = 0.57
SLOW_SHARE = 0.25


class Rng(Protocol):
    """What the model uses of ``random.Random``."""

    def random(self) -> float: ...
    def uniform(self, a: float, b: float) -> float: ...
    def gauss(self, mu: float, sigma: float) -> float: ...
    def expovariate(self, lambd: float) -> float: ...
    def randrange(self, stop: int, /) -> int: ...


CRASH, GPU_LOSS, SLOW = "crash", "gpu-loss", "slow"
KINDS: tuple[str, ...] = (CRASH, GPU_LOSS, SLOW)


@dataclass(frozen=True, slots=True)
class FailureRates:
    """Per-node Poisson rates (per hour) of each kind, how bad each is, and how long repair takes."""

    crash_per_node_h: float = INTERRUPTIONS_PER_NODE_H * (1.0 - GPU_SHARE)
    gpu_loss_per_node_h: float = INTERRUPTIONS_PER_NODE_H * GPU_SHARE
    slow_per_node_h: float = INTERRUPTIONS_PER_NODE_H * SLOW_SHARE
    slow_factor_min: float = 1.2
    slow_factor_max: float = 3.0
    # Repair: a crashed node is rebooted or reimaged, a lost GPU is swapped, a slow node is looked at.
    crash_repair_s: float = 2 * 3600.0
    gpu_loss_repair_s: float = 24 * 3600.0
    slow_repair_s: float = 4 * 3600.0

    def scaled(self, factor: float) -> FailureRates:
        return FailureRates(
            self.crash_per_node_h * factor,
            self.gpu_loss_per_node_h * factor,
            self.slow_per_node_h * factor,
            self.slow_factor_min,
            self.slow_factor_max,
            self.crash_repair_s,
            self.gpu_loss_repair_s,
            self.slow_repair_s,
        )

    @property
    def per_node_h(self) -> float:
        return self.crash_per_node_h + self.gpu_loss_per_node_h + self.slow_per_node_h

    def repair_s(self, kind: str) -> float:
        return {CRASH: self.crash_repair_s, GPU_LOSS: self.gpu_loss_repair_s, SLOW: self.slow_repair_s}[kind]


@dataclass(frozen=True, slots=True)
class Failure:
    """One failure drawn from the model: what breaks, where, when, and how badly."""

    time_s: float
    node_id: str
    kind: str
    gpus_lost: int = 0  # gpu-loss only
    slowdown: float = 1.0  # slow only: step time multiplier

    @property
    def heartbeats_stop(self) -> bool:
        return self.kind == CRASH


def next_failure(
    rng: Rng,
    rates: FailureRates,
    node_ids: Sequence[str],
    after_s: float,
    gpus_per_node: int = 8,
) -> Failure | None:
    """The next failure among ``node_ids`` after ``after_s`` (superposed per-node Poisson processes).

    Nodes are chosen uniformly from the sorted ids, so the same seed and fleet give the same
    failures in the simulator and the live loop."""
    total_per_s = rates.per_node_h * len(node_ids) / 3600.0
    if total_per_s <= 0 or not node_ids:
        return None
    time_s = after_s + rng.expovariate(total_per_s)
    node_id = sorted(node_ids)[rng.randrange(len(node_ids))]
    pick = rng.random() * rates.per_node_h
    if pick < rates.crash_per_node_h:
        return Failure(time_s, node_id, CRASH)
    if pick < rates.crash_per_node_h + rates.gpu_loss_per_node_h:
        # Mostly one GPU; occasionally a whole board (two).
        return Failure(time_s, node_id, GPU_LOSS, gpus_lost=min(gpus_per_node, 1 if rng.random() < 0.9 else 2))
    return Failure(time_s, node_id, SLOW, slowdown=rng.uniform(rates.slow_factor_min, rates.slow_factor_max))


def failures_between(
    rng: Rng,
    rates: FailureRates,
    node_ids: Sequence[str],
    from_s: float,
    to_s: float,
    gpus_per_node: int = 8,
) -> list[Failure]:
    """Every failure in ``(from_s, to_s]``: what one live tick applies. Nodes may fail more than once."""
    failures: list[Failure] = []
    at = from_s
    while True:
        failure = next_failure(rng, rates, node_ids, at, gpus_per_node)
        if failure is None or failure.time_s > to_s:
            return failures
        failures.append(failure)
        at = failure.time_s
