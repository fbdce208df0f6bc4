"""Small builders for simulator tests: jobs in a line, fleets by shorthand, one-call runs."""

from __future__ import annotations

from dataclasses import replace

from scheduling.engine import Job, Policy, Quota
from scheduling.sim.fleet import parse_fleet
from scheduling.sim.simulator import SimResult, run_simulation

POLICIES = {"fifo": Policy.fifo(), "easy": Policy.easy(), "fleetline": Policy()}


def job(job_id: str, submit_s: float, gpus: int, duration_s: float, team: str = "alpha", **overrides: object) -> Job:
    base = Job(job_id, team, "training", 0, True, "gpu", gpus, duration_s, submit_s)
    return replace(base, **overrides)  # type: ignore[arg-type]


def simulate(fleet: str, jobs: list[Job], policy: str, quotas: tuple[Quota, ...] = (), **changes: object) -> SimResult:
    """A replay under the preset `policy`, with the Policy fields in `changes` changed."""
    chosen = replace(POLICIES[policy], **changes)  # type: ignore[arg-type]
    return run_simulation(jobs, parse_fleet(fleet).nodes(), chosen, policy_name=policy, quotas=quotas)
