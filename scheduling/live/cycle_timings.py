"""How long each step of the cycle takes, as histograms kept in Redis for ``/metrics``.

The cycle runs in whichever Celery worker leads, on any machine, while ``/metrics`` is answered by
a web process: a histogram kept in one process's memory (or in prometheus-client's per-host
multiprocess files) would be invisible to the process that is scraped. So the leader adds each
tick's step durations to one Redis hash shared by the whole deployment, and every web process
reads the same figures. The counts live as long as Redis keeps them; a Redis restart looks to
Prometheus like any counter reset, which ``rate()`` handles.

Layout of the hash: ``<step>:<bucket index>`` holds how many observations fell in that bucket
(not cumulative: one field written per step and tick) and ``<step>:sum`` the seconds observed;
the count is the sum of the buckets. One MULTI per tick, so a scrape never sees half a tick.
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Mapping
from dataclasses import dataclass

import redis
from prometheus_client.utils import floatToGoString
from redis.exceptions import RedisError

logger = logging.getLogger("fleetline.cycle")

CYCLE_TIMINGS_KEY = "fleetline:metrics:cycle-steps"
# Upper bounds in seconds; the last bucket (+Inf) is implied.
STEP_BUCKETS_S: tuple[float, ...] = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


@dataclass(frozen=True, slots=True)
class StepHistogram:
    """One step's histogram: cumulative counts per upper bound (ending with +Inf), sum, count."""

    step: str
    buckets: tuple[tuple[str, int], ...]
    sum_s: float
    count: int


def _bucket_index(seconds: float) -> int:
    """Index of the first bound that holds ``seconds``; ``len(STEP_BUCKETS_S)`` is +Inf."""
    return bisect.bisect_left(STEP_BUCKETS_S, seconds)


def cycle_timings_record(*, client: redis.Redis, timings_ms: Mapping[str, float]) -> None:
    """Add one tick's step durations. Metrics must never cost a tick: a Redis error is logged."""
    pipe = client.pipeline(transaction=True)
    for step, ms in timings_ms.items():
        seconds = max(0.0, ms / 1000.0)
        pipe.hincrby(CYCLE_TIMINGS_KEY, f"{step}:{_bucket_index(seconds)}", 1)
        pipe.hincrbyfloat(CYCLE_TIMINGS_KEY, f"{step}:sum", seconds)
    try:
        pipe.execute()
    except RedisError:
        logger.warning("cycle step timings not recorded: Redis refused them", exc_info=True)


def cycle_timings_read(*, client: redis.Redis) -> list[StepHistogram]:
    """Every step's histogram, steps in name order."""
    stored: dict[bytes, bytes] = client.hgetall(CYCLE_TIMINGS_KEY)  # type: ignore[assignment]
    raw = {key.decode(): value.decode() for key, value in stored.items()}
    steps = sorted({key.rsplit(":", 1)[0] for key in raw})
    histograms = []
    bounds = [*(floatToGoString(bound) for bound in STEP_BUCKETS_S), "+Inf"]
    for step in steps:
        running = 0
        buckets = []
        for index, bound in enumerate(bounds):
            running += int(raw.get(f"{step}:{index}", 0))
            buckets.append((bound, running))
        histograms.append(
            StepHistogram(
                step=step,
                buckets=tuple(buckets),
                sum_s=float(raw.get(f"{step}:sum", 0.0)),
                count=running,
            )
        )
    return histograms
