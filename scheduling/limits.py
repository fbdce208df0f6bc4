"""The bounds on every number a job may carry, in one place.

The job form, the API, the model (so the Django admin and ``full_clean`` refuse them too), the
submit service and the trace importer all check against these, after converting to seconds. A job
outside them is refused with a message naming the field and the bound, never stored: an infinite
duration would hold its GPUs forever, and a gang of 10**20 GPUs does not fit in a database integer.

Plain Python with no Django import, so the simulator's trace importer can use it.
"""

from __future__ import annotations

import math

SECONDS_PER_DAY = 86_400
SECONDS_PER_YEAR = 365 * SECONDS_PER_DAY

# Gang size: 65,536 GPUs is 8,192 eight-GPU nodes, larger than any fleet this product models.
MAX_GANG_GPUS = 65_536
# Work at full size and the time limit: at most a year of fleet time.
MAX_DURATION_S = float(SECONDS_PER_YEAR)
MAX_TIME_LIMIT_S = float(SECONDS_PER_YEAR)
# A job's command or batch script on a real backend.
MAX_COMMAND_CHARS = 65_536
# A job that checkpoints checkpoints at least once a year, and at most once a second.
MIN_CHECKPOINT_INTERVAL_S = 1.0
MAX_CHECKPOINT_INTERVAL_S = float(SECONDS_PER_YEAR)
# One petabyte: a trillion-parameter model with optimiser state is about 16 TB.
MAX_CHECKPOINT_GB = 1_000_000.0
# Serving demand curves repeat at most once a year (a day is usual), peaking within the period.
MAX_DEMAND_PERIOD_H = SECONDS_PER_YEAR / 3600.0
# Trace replay: submissions within ten years of the trace start, priorities within a million of zero.
MAX_TRACE_SUBMIT_S = 10.0 * SECONDS_PER_YEAR
MAX_PRIORITY = 1_000_000


def quantity(value: float) -> str:
    """``31536000.0`` -> ``"31,536,000"``; ``0.5`` -> ``"0.5"``: bounds as people read them."""
    return f"{int(value):,}" if float(value).is_integer() else f"{value:,}"


def range_problem(
    value: float, *, maximum: float, minimum: float | None = None, positive: bool = False, unit: str = ""
) -> str | None:
    """Why ``value`` is out of bounds ("must be at most 31,536,000 s"), or None when it is within.

    NaN and infinities are refused first: NaN compares false with every bound, so a plain
    ``value > maximum`` check would let it through.
    """
    suffix = f" {unit}" if unit else ""
    if isinstance(value, float) and not math.isfinite(value):
        return "must be a finite number"
    if positive and value <= 0:
        return "must be positive"
    if minimum is not None and value < minimum:
        return f"must be at least {quantity(minimum)}{suffix}"
    if value > maximum:
        return f"must be at most {quantity(maximum)}{suffix}"
    return None
