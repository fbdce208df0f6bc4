"""The web process's garbage collector, set for serving requests.

A request makes a few tens of thousands of Python objects, most of them gone by the time it is
answered. With CPython's default thresholds (a young collection every 700 allocations) many of them
are still alive at two young collections, so they reach the oldest generation, and the process ran
a full collection (every object of Django, DRF and the project: 100-260 ms) about twice a second
under load: the pauses were the API's p99 latency and a sixth of its CPU. Here the modules and
objects made at start-up are moved out of the collector's sight (``gc.freeze``: they live as long
as the process) and the young generation is larger, so a request's objects die young."""

from __future__ import annotations

import gc

# Young collections every 5,000 allocations (not 700); the middle one every 20 young ones;
# a full collection after 100 middle ones at most (CPython also waits until the objects that
# survived since the last full one are a quarter of those it would scan).
THRESHOLDS = (5000, 20, 100)


def settle_for_requests() -> None:
    """Import every view now rather than on the first request, then freeze what start-up made and
    set the thresholds. Called once by the ASGI application's module."""
    from django.urls import get_resolver

    get_resolver().url_patterns  # noqa: B018 - imports the URLconf and with it every view
    gc.collect()
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)
