"""The fleet's share at one instant, as every page and the live feed state it: which GPUs serve,
train, run batch work or sit idle, the utilisation, and the sentence that says so. Plain data,
no ORM and no plotting, so the cycle's publisher and the dashboard use the same definitions."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


def fleet_utilisation(allocated_gpus: int, capacity_gpus: int) -> float:
    """GPUs held by jobs over every installed GPU, healthy or not: the simulator's metrics
    contract (allocated GPU-time over capacity x time) taken at one instant."""
    return allocated_gpus / capacity_gpus if capacity_gpus else 0.0


@dataclass(frozen=True, slots=True)
class SharePoint:
    sim_time_s: float
    serving_gpus: int
    training_gpus: int
    batch_gpus: int
    healthy_gpus: int
    pending_jobs: int
    capacity_gpus: int

    @property
    def allocated_gpus(self) -> int:
        return self.serving_gpus + self.training_gpus + self.batch_gpus

    @property
    def idle_gpus(self) -> int:
        """Healthy GPUs nobody holds."""
        return max(0, self.healthy_gpus - self.allocated_gpus)

    @property
    def utilisation(self) -> float:
        return fleet_utilisation(self.allocated_gpus, self.capacity_gpus)

    @property
    def utilisation_percent(self) -> int:
        """Rounded half up, as the dashboard's live feed rounds ``utilisation``."""
        return int(100 * self.utilisation + 0.5)


def share_summary_text(points: Sequence[SharePoint]) -> str:
    """The share and utilisation charts in one sentence, for readers who cannot see them."""
    if not points:
        return "No fleet samples yet."
    last = points[-1]
    return (
        f"At fleet hour {last.sim_time_s / 3600:.1f}: {last.serving_gpus} GPUs serving, {last.training_gpus} "
        f"training, {last.batch_gpus} batch, {last.idle_gpus} idle of {last.healthy_gpus} healthy "
        f"({last.utilisation_percent}% of all {last.capacity_gpus} used); {last.pending_jobs} jobs pending."
    )
