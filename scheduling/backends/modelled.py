"""The modelled backend: the engine's FleetState and the failure model are the fleet, so there is
nothing to carry out and nothing to observe."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from scheduling.backends.base import Observed

if TYPE_CHECKING:
    from scheduling.cycle.snapshot import Loaded
    from scheduling.tick_outcome import AppliedTick


class ModelledBackend:
    name = "modelled"
    real = False

    def fleet_sync(self, *, sim_now_s: float, wall_now: datetime) -> set[int]:
        return set()

    def runs_observe(self, *, loaded: Loaded) -> Observed:
        return Observed()

    def plan_carry_out(self, *, applied: AppliedTick, sim_now_s: float, token: int) -> None:
        return None

    def after_commit(self) -> None:
        return None
