"""The seeded failure model: grounded rates, reproducible draws."""

from __future__ import annotations

import random

import pytest

from scheduling.engine.failures import CRASH, GPU_LOSS, SLOW, FailureRates, failures_between, next_failure

NODES = [f"n{i:04d}" for i in range(2048)]


def test_default_rates_reproduce_419_interruptions_in_54_days_on_2048_nodes() -> None:
    rates = FailureRates()
    interruptions = (rates.crash_per_node_h + rates.gpu_loss_per_node_h) * 2048 * 54 * 24

    assert interruptions == pytest.approx(419.0)


def test_the_same_seed_gives_the_same_failures() -> None:
    first = failures_between(random.Random(3), FailureRates().scaled(100), NODES[:64], 0.0, 86400.0)
    again = failures_between(random.Random(3), FailureRates().scaled(100), NODES[:64], 0.0, 86400.0)

    assert first == again and len(first) > 0


def test_a_long_run_sees_the_published_mix_of_kinds() -> None:
    failures = failures_between(random.Random(1), FailureRates(), NODES, 0.0, 540 * 86400.0)
    kinds = [failure.kind for failure in failures]
    interruptions = kinds.count(CRASH) + kinds.count(GPU_LOSS)

    # Ten times the 54 days: about 4,190 interruptions, 57 % of them GPUs.
    assert interruptions == pytest.approx(4190, rel=0.05)
    assert kinds.count(GPU_LOSS) / interruptions == pytest.approx(0.57, abs=0.03)
    assert kinds.count(SLOW) > 0
    assert all(f.gpus_lost >= 1 for f in failures if f.kind == GPU_LOSS)
    assert all(1.2 <= f.slowdown <= 3.0 for f in failures if f.kind == SLOW)


def test_no_nodes_or_no_rate_means_no_failures() -> None:
    assert next_failure(random.Random(0), FailureRates(), [], 0.0) is None
    assert next_failure(random.Random(0), FailureRates().scaled(0.0), NODES, 0.0) is None
