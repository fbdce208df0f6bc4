"""Pause CPython's cyclic garbage collector around allocation-heavy work (a fast path, listed in
`schedule`'s docstring with the engine's others).

A scheduling cycle allocates a few objects per job (statuses, candidates, working entries), all
freed by reference counting when the cycle ends: it makes no reference cycles. CPython's
generational collector still runs on allocation counts, and once enough of those objects survive
the young generations it traverses the whole heap, snapshot included. At 16,384 nodes and 80,000
pending jobs that was two full collections per cycle, a quarter of its time, collecting nothing;
the cost grows with the heap, so it grows faster than the fleet. (Mercurial pauses the collector
the same way while it builds large indexes.)

The pause restores the collector's previous state and collects nothing itself: the result of the
work inside does not depend on it. `tests/engine/test_collector.py` checks that a cycle leaves no
cyclic garbage behind.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """Run the body with the cyclic collector off, if it was on; reference counting still frees."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
