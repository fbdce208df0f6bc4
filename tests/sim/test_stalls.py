"""A replay always ends: one that stops making progress raises `SimulationStalled`, naming the jobs."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Set as AbstractSet
from pathlib import Path

import pytest

from scheduling.engine import Kept, Plan, Policy, Preempt, Snapshot, Start
from scheduling.sim.fleet import parse_fleet
from scheduling.sim.simulator import MAX_CYCLES_PER_INSTANT, SimulationStalled, run_simulation

from .builders import job

ROOT = Path(__file__).resolve().parents[2]


def rotating(grace_s: float):
    """A stand-in scheduler that never lets a job finish: each cycle preempts whatever runs on the
    one node and starts the pending job that follows it in id order (a deliberate livelock)."""

    def scheduler(snapshot: Snapshot, now: float, explain: AbstractSet[str], kept: Kept) -> Plan:
        node_id = snapshot.nodes[0].id
        pending = sorted(job.id for job in snapshot.pending)
        if not pending:
            return Plan((), ())
        current = max((run.job.id for run in snapshot.running), default="")
        following = next((job_id for job_id in pending if job_id > current), pending[0])
        actions: list[Preempt | Start] = [
            Preempt(run.job.id, f"preempted-by:{following}", grace_s)
            for run in snapshot.running
            if run.grace_until_s is None
        ]
        if not (grace_s and snapshot.running):
            actions.append(Start(following, ((node_id, 8),), False, "node"))
        return Plan(tuple(actions), ())

    return scheduler


def test_a_job_restarted_again_and_again_while_time_advances_stops_the_replay_naming_the_jobs() -> None:
    jobs = [job("a", 0, 8, 5000), job("b", 0, 8, 5000)]
    with pytest.raises(SimulationStalled) as stalled:
        run_simulation(jobs, parse_fleet("1x1x1x8").nodes(), Policy(), scheduler=rotating(30.0), skip_idle_cycles=False)
    message = str(stalled.value)
    assert "started or resized 100 times" in message and "no job completing" in message
    assert set(stalled.value.jobs) == {"a", "b"}
    assert stalled.value.time_s > 1000  # simulated time kept advancing all along


def test_cycles_that_keep_acting_at_one_instant_stop_the_replay_naming_the_jobs() -> None:
    # Twenty jobs take turns at one instant: none is restarted 100 times before the cycle limit.
    jobs = [job(f"j{index:02d}", 0, 8, 5000) for index in range(20)]
    with pytest.raises(SimulationStalled) as stalled:
        run_simulation(jobs, parse_fleet("1x1x1x8").nodes(), Policy(), scheduler=rotating(0.0), skip_idle_cycles=False)
    assert f"{MAX_CYCLES_PER_INSTANT + 1} cycles at this instant" in str(stalled.value)
    assert stalled.value.time_s == 60  # the first re-plan after the first start
    assert set(stalled.value.jobs) == {job.id for job in jobs}


def test_the_preemption_loop_of_a_job_quota_never_admits_ends_either_way_from_the_command_line(
    tmp_path: Path,
) -> None:
    # A serving job that quota can never admit used to evict a lower-priority loan, which restarted
    # at the next cycle, forever. Fixed in the engine the replay finishes; if such a loop ever comes
    # back, the command stops with exit code 3 and names both jobs instead of running for ever.
    trace, quotas = tmp_path / "trace.csv", tmp_path / "quotas.csv"
    trace.write_text(
        "job_id,submit_time,duration,gpus,team,kind,priority,checkpoint_interval\n"
        "b,0,5000,16,tC,batch,5,300\ns,100,3600,24,tA,serving,0,\nlast,200,60,1,tC,batch,5,\n"
    )
    quotas.write_text("team,guaranteed,borrow_limit,lend_limit\ntA,8,32,\ntB,16,0,0\n")
    command = [sys.executable, "-m", "scheduling.sim", "--trace", str(trace), "--fleet", "2x1x2x8"]
    command += ["--quotas", str(quotas), "--policy", "fleetline", "--json", str(tmp_path / "out.json")]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode in (0, 3), done.stderr
    if done.returncode == 3:
        assert "simulation stalled" in done.stderr and "'b'" in done.stderr and "'s'" in done.stderr
