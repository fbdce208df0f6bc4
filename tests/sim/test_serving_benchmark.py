"""The serving benchmark's generated deployments and its checkpoint variant."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from scheduling.engine import Job
from scheduling.sim.serving import demand_profile

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "sim_serving.py"
WEEK = (0.0, 7 * 86400.0)


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("sim_serving", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("share", [0.2, 0.4])
def test_generated_deployments_ask_for_about_the_share_of_the_fleet_at_their_joint_peak(bench, share: float) -> None:
    deployments = bench.deployments_for(1336, share, WEEK)
    profile = demand_profile(deployments, *WEEK)
    # Whole replicas: within the largest replica (16 GPUs) of the share asked for.
    assert abs(profile.peak_gpus - share * 1336) <= 16
    assert 0.5 * profile.peak_gpus < profile.mean_gpus < profile.peak_gpus
    assert {d.gpus_per_replica for d in deployments} == {16, 8, 4, 2, 1}


def test_the_checkpoint_variant_checkpoints_every_half_hour_and_on_preemption(bench) -> None:
    jobs = (Job("a", "t", "training", 0, True, "gpu", 8, 100.0, 0.0),)
    assert bench.shaped(jobs, "none") == list(jobs)
    (shaped,) = bench.shaped(jobs, "on-preempt")
    assert shaped.checkpoint_interval_s == 1800.0 and shaped.checkpoint_on_preempt
