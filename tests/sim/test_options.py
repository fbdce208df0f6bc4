"""The replay's and the comparison's keyword settings: one list of names each, checked by name."""

from __future__ import annotations

import dataclasses
import tomllib
from pathlib import Path
from typing import Any, get_type_hints

import pytest

from scheduling.engine import Policy
from scheduling.sim.fleet import parse_fleet
from scheduling.sim.runner import CompareOptions, CompareSettings, compare_policies
from scheduling.sim.simulator import ReplayOptions, ReplaySettings, run_simulation

from .builders import job

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("options", "settings"), [(ReplayOptions, ReplaySettings), (CompareOptions, CompareSettings)])
def test_the_keyword_options_name_exactly_the_settings(options: Any, settings: Any) -> None:
    assert list(get_type_hints(options)) == [field.name for field in dataclasses.fields(settings)]
    assert not options.__required_keys__  # every option has a default in the settings


def test_a_replay_refuses_an_unknown_option_before_it_starts() -> None:
    with pytest.raises(TypeError, match="tick"):
        run_simulation([job("a", 0, 8, 100)], parse_fleet("1x1x1x8").nodes(), Policy(), tick=60.0)  # type: ignore[call-arg]


def test_a_comparison_refuses_an_unknown_option() -> None:
    with pytest.raises(TypeError, match="quota"):
        compare_policies([], parse_fleet("1x1x1x8"), ["easy"], quota=None)  # type: ignore[call-arg]


def test_the_settings_reach_the_replay() -> None:
    ticks = [60.0 * k for k in range(4)]
    result = run_simulation(
        [job("a", 0, 8, 100), job("b", 10, 8, 50)],
        parse_fleet("1x1x1x8").nodes(),
        Policy(),
        policy_name="mine",
        tick_s=60.0,
        clock=iter(ticks).__next__,
    )
    assert result.metrics["policy"] == "mine"
    assert result.metrics["sim_wall_s"] == 60.0  # the given clock, read at the start and the end
    # On 60-s ticks b, submitted at 10, starts at the first tick after a ends (100): 120.
    assert result.jct_by_job == {"a": 100.0, "b": 160.0}


def test_lint_bounds_every_function_of_the_simulator_without_exemption() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert config["tool"]["ruff"]["lint"].get("per-file-ignores", {}) == {}
