"""Extension points for models that act on the fleet over time: failures, serving demand curves.

A hook says when it next wants to act (`next_time`) and acts then (`on_time`), through a
`SimContext` that lets it submit jobs and change the `FleetState` (e.g. `fail_node`). The events it
returns are recorded like any other. `metrics()` fills contract keys the hook owns
(`failures`, `mttd_mean_s`, `mttr_mean_s`, `serving_slo_attainment`, ...).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from scheduling.engine import Event, FleetState, Job


@dataclass
class SimContext:
    state: FleetState
    rng: random.Random
    submit: Callable[[Job], None]


class Hook(Protocol):
    def next_time(self) -> float | None:
        """The next simulated time this hook wants to act at, or None for never."""
        ...

    def on_time(self, sim: SimContext, now: float) -> list[Event]:
        """Act at `now` (called when `now` >= `next_time()`); return the events caused."""
        ...

    def metrics(self) -> dict[str, Any]:
        """Contract keys this hook owns, overriding the simulator's defaults."""
        ...


@runtime_checkable
class Observer(Protocol):
    """A hook may also watch every event of the replay (`observe`), e.g. to time the starts of the
    jobs it submitted; the simulator calls it for hooks that define it."""

    def observe(self, events: list[Event]) -> None: ...
