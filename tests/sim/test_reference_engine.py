"""A replay planned by the plain reference engine (`--engine reference`) is the replay planned by
the fast one: the same metrics, byte for byte (wall-clock keys apart)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from scheduling.engine import Job, Policy, Quota
from scheduling.sim.cli import main
from scheduling.sim.fleet import parse_fleet
from scheduling.sim.metrics import WALL_KEYS
from scheduling.sim.runner import compare_policies
from scheduling.sim.simulator import ENGINES, run_simulation
from scheduling.sim.trace import load_itp

from .builders import job

SAMPLE = Path(__file__).resolve().parents[2] / "scheduling" / "sim" / "data" / "itp-sample"


def test_the_itp_sample_replays_identically_under_both_engines() -> None:
    trace = load_itp(sorted(SAMPLE.glob("*.csv")))
    fast, plain = (
        compare_policies(trace, parse_fleet("1x2x4x8"), ["fifo", "easy", "fleetline"], limit=120, engine=engine)
        for engine in ("fast", "reference")
    )

    assert plain.to_json(deterministic=True) == fast.to_json(deterministic=True)


def _contested_workload(count: int, priorities: tuple[int, ...]) -> list[Job]:
    """Two teams, elastic and checkpointing jobs, gangs, jobs nobody may preempt, time limits."""
    draw = random.Random(17)
    jobs = []
    for index in range(count):
        gpus = draw.choice((1, 2, 4, 8, 8, 16))
        elastic = gpus >= 2 and draw.random() < 0.3
        duration_s = draw.uniform(300.0, 4000.0)
        jobs.append(
            job(
                f"j{index}",
                index * draw.uniform(20.0, 200.0),
                gpus,
                duration_s,
                team=draw.choice(("a", "b")),
                priority=draw.choice(priorities),
                preemptible=draw.random() < 0.8,
                time_limit_s=duration_s * draw.uniform(1.0, 2.0),
                min_gpus=gpus // 2 if elastic else None,
                max_gpus=gpus * 2 if elastic else None,
                checkpoint_interval_s=draw.choice((None, 600.0)),
            )
        )
    return jobs


QUOTAS = (Quota("a", "gpu", 16, 16), Quota("b", "gpu", 8, 24))


@pytest.mark.parametrize(
    ("priorities", "quotas"),
    [((0, 0, 5, 10), ()), ((0,), QUOTAS)],
    ids=["preemption by priority", "reclaim of guarantees"],
)
def test_a_replay_with_preemption_is_identical_under_both_engines(
    priorities: tuple[int, ...], quotas: tuple[Quota, ...]
) -> None:
    jobs = _contested_workload(80, priorities)
    nodes = parse_fleet("1x2x2x8").nodes()
    # By default the 16-GPU gangs of a team below its guarantee spread across the two racks at once
    # instead of reclaiming one; with them waiting for a rack, loans are reclaimed by preemption.
    for policy in (Policy(), Policy(guarantee_spread_after_s=None)):
        fast, plain = (
            run_simulation(jobs, nodes, policy, quotas=quotas, scheduler=ENGINES[engine]).metrics
            for engine in ("fast", "reference")
        )

        assert {key: plain[key] for key in plain if key not in WALL_KEYS} == {
            key: fast[key] for key in fast if key not in WALL_KEYS
        }
    assert fast["preemptions"] > 0


@pytest.mark.parametrize("credit", [1.0, None], ids=["rent or buy", "wait to the natural start"])
def test_preemption_by_priority_and_reclaim_of_guarantees_do_not_undo_each_other(credit: float | None) -> None:
    # Credited the wait to its natural start, a borrower of higher priority once took two jobs of a
    # team that each left it covered and together not, and that team reclaimed them at once, forever.
    jobs = _contested_workload(80, (0, 0, 5, 10))
    policy = Policy(reclaim_wait_credit=credit)

    metrics = run_simulation(jobs, parse_fleet("1x2x2x8").nodes(), policy, quotas=QUOTAS).metrics

    assert metrics["preemptions"] > 0


def test_the_cli_runs_the_reference_engine_on_request(tmp_path: Path) -> None:
    args = ["--format", "itp", "--trace", str(SAMPLE / "cluster05.csv"), "--fleet", "1x2x4x8", "--limit", "80"]
    args += ["--serving", str(SAMPLE / "serving.json"), "--failures", "3:50", "--policy", "fleetline"]
    outputs = {}
    for engine in ("fast", "reference"):
        path = tmp_path / f"{engine}.json"
        assert main([*args, "--engine", engine, "--json", str(path)]) == 0
        results = json.loads(path.read_text())["results"]
        outputs[engine] = [{k: v for k, v in result.items() if k not in WALL_KEYS} for result in results]

    assert outputs["reference"] == outputs["fast"]


def test_an_unknown_engine_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown engine 'slow'"):
        compare_policies([], parse_fleet("1x1x1x8"), ["fifo"], engine="slow")
    with pytest.raises(SystemExit):
        main(["--trace", "x.csv", "--fleet", "1x1x1x8", "--engine", "slow"])
