"""Serving demand curves: how many replicas a deployment wants at a given fleet time."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class DiurnalDemand:
    """``min_replicas`` at the trough, ``max_replicas`` at ``peak_hour``, a cosine in between."""

    min_replicas: int
    max_replicas: int
    peak_hour: float = 14.0
    period_h: float = 24.0

    def replicas_at(self, time_s: float) -> int:
        hours = time_s / 3600.0
        phase = 2.0 * math.pi * (hours - self.peak_hour) / self.period_h
        level = (1.0 + math.cos(phase)) / 2.0
        return self.min_replicas + round((self.max_replicas - self.min_replicas) * level)
