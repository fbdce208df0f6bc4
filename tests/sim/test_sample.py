"""The bundled ITP sample replays under every policy and reports every contract key."""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduling.sim.fleet import parse_fleet
from scheduling.sim.metrics import CONTRACT_KEYS
from scheduling.sim.runner import compare_policies
from scheduling.sim.trace import load_itp

SAMPLE = Path(__file__).resolve().parents[2] / "scheduling" / "sim" / "data" / "itp-sample"


@pytest.fixture(scope="module")
def comparison():
    trace = load_itp(sorted(SAMPLE.glob("*.csv")))
    return compare_policies(trace, parse_fleet("1x2x4x8"), ["fifo", "easy", "fleetline"])


def test_the_sample_holds_two_teams_of_150_jobs() -> None:
    trace = load_itp(sorted(SAMPLE.glob("*.csv")))
    assert len(trace) == 300
    assert sorted({job.team for job in trace}) == ["cluster05", "cluster10"]


def test_the_sample_replays_under_every_policy_with_every_contract_key(comparison) -> None:
    assert [result.policy for result in comparison.results] == ["fifo", "easy", "fleetline"]
    for result in comparison.results:
        assert set(CONTRACT_KEYS) <= set(result.metrics)
        assert result.metrics["completed"] == 300
        assert result.metrics["unfinished"] == 0


def test_the_sample_ships_with_its_licence() -> None:
    readme = (SAMPLE / "README.md").read_text()
    assert "MIT License" in readme and "Microsoft Corporation" in readme


def test_the_same_seed_gives_byte_identical_json_apart_from_wall_clock_keys(comparison) -> None:
    trace = load_itp(sorted(SAMPLE.glob("*.csv")))
    again = compare_policies(trace, parse_fleet("1x2x4x8"), ["fifo", "easy", "fleetline"])
    assert again.to_json(deterministic=True) == comparison.to_json(deterministic=True)
    assert "sim_wall_s" not in again.to_json(deterministic=True)


def test_useful_work_matches_the_engines_own_count_when_the_window_covers_everything() -> None:
    from .builders import job, simulate

    # The window ends at the last submission, after everything has finished.
    result = simulate("2x1x2x8", [job("x", 0, 8, 1000), job("y", 0, 16, 100), job("z", 2000, 1, 1)], "fifo")
    assert result.metrics["goodput"] * 32 * 2000 == pytest.approx(8 * 1000 + 16 * 100)
