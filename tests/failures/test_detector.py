"""Dead versus slow, on crafted heartbeat and step-time streams."""

from __future__ import annotations

import random

import pytest

from scheduling.engine.detector import (
    DEAD,
    OK,
    SLOW,
    DetectorPolicy,
    Streams,
    classify,
    dead_detected_at,
    is_dead,
    measure_detector,
    slow_nodes,
)

POLICY = DetectorPolicy(heartbeat_interval_s=10.0, dead_after_missed=3, slow_threshold=1.3, slow_consecutive_steps=3)


@pytest.mark.parametrize(
    ("last_heartbeat_s", "now_s", "dead"),
    [
        (100.0, 129.0, False),  # two intervals and a bit: not yet
        (100.0, 130.0, True),  # exactly k intervals
        (100.0, 500.0, True),
        (None, 500.0, False),  # never heard from: nothing missed yet
    ],
)
def test_a_node_is_dead_after_k_missed_heartbeat_intervals(
    last_heartbeat_s: float | None, now_s: float, dead: bool
) -> None:
    assert is_dead(last_heartbeat_s, now_s, POLICY) is dead


def test_a_crash_is_detected_k_intervals_after_the_last_heartbeat_before_it() -> None:
    # Heartbeats at 3, 13, 23, ...; the node dies at 47, so the last heartbeat was at 43.
    assert dead_detected_at(47.0, 3.0, POLICY) == pytest.approx(73.0)


def test_a_node_slower_than_its_gang_for_m_steps_in_a_row_is_slow() -> None:
    gang = {"a": [10, 10, 14, 14, 14], "b": [10, 10, 10, 10, 10], "c": [10, 10, 10, 10, 10]}

    assert slow_nodes(gang, POLICY) == {"a": pytest.approx(1.4)}


def test_one_fast_step_in_between_resets_the_slow_streak() -> None:
    gang = {"a": [14, 14, 10, 14, 14], "b": [10] * 5, "c": [10] * 5}

    assert slow_nodes(gang, POLICY) == {}


def test_a_two_node_gang_still_points_at_its_straggler() -> None:
    assert list(slow_nodes({"a": [10, 10, 10], "b": [20, 20, 20]}, POLICY)) == ["b"]


def test_a_one_node_gang_is_never_called_slow() -> None:
    assert slow_nodes({"a": [50, 50, 50]}, POLICY) == {}


def test_a_dead_node_is_dead_not_slow_and_a_slow_node_heartbeating_is_slow_not_dead() -> None:
    # "a" stopped heartbeating at 100 and its last steps were slow; "b" heartbeats but is slow.
    heartbeats = {"a": 100.0, "b": 138.0, "c": 139.0, "d": 137.0, "e": 135.0}
    gangs = [
        {"a": [20, 20, 20], "c": [10, 10, 10], "d": [10, 10, 10]},
        {"b": [25, 25, 25], "e": [10, 10, 10], "c": [10, 10, 10]},
    ]

    verdicts = classify(now_s=140.0, last_heartbeat_s=heartbeats, gangs=gangs, policy=POLICY)

    assert verdicts == {"a": DEAD, "b": SLOW, "c": OK, "d": OK, "e": OK}


def test_the_measured_detector_finds_every_crash_in_about_k_intervals_without_false_alarms() -> None:
    stats = measure_detector(random.Random(7), DetectorPolicy(), Streams(gangs=10, horizon_s=1200.0))

    assert stats.dead_missed == 0 and stats.misclassified == 0
    # k intervals after the last heartbeat (up to one interval before the crash), seen at the next check.
    assert 20.0 <= (stats.dead_ttd_mean_s or 0.0) <= 40.0
    assert stats.false_positives == 0


def test_a_hair_trigger_detector_pays_in_false_positives() -> None:
    hair = DetectorPolicy(dead_after_missed=1, slow_consecutive_steps=1)

    stats = measure_detector(random.Random(7), hair, Streams(gangs=10, horizon_s=1200.0, heartbeat_loss=0.05))

    assert stats.false_positives > 0
