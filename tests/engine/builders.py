"""Fluent builders for engine tests: fleets, jobs, running work, quotas and whole scenarios."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from scheduling.engine import Job, Node, Plan, Policy, Quota, Running, Snapshot, Team, schedule


def fleet(spec: str = "1x2x4x8", accelerator: str = "a100", prefix: str = "") -> tuple[Node, ...]:
    """`pods x racks x nodes x gpus`, e.g. "1x2x4x8"; node ids read p0-r1-n2."""
    pods, racks, nodes, gpus = (int(part) for part in spec.split("x"))
    return tuple(
        Node(f"{prefix}p{p}-r{r}-n{n}", f"{prefix}p{p}", f"r{r}", accelerator, gpus, gpus)
        for p in range(pods)
        for r in range(racks)
        for n in range(nodes)
    )


def job(job_id: str, gpus: int = 8, **overrides: object) -> Job:
    base = Job(
        id=job_id,
        team="alpha",
        kind="training",
        priority=0,
        preemptible=True,
        accelerator="a100",
        gpus=gpus,
        duration_s=3600.0,
        submit_s=0.0,
    )
    return replace(base, **overrides)  # type: ignore[arg-type]


def running(
    the_job: Job,
    allocation: tuple[tuple[str, int], ...] | None = None,
    *,
    on: str | tuple[str, ...] | None = None,
    start_s: float = 0.0,
    progress_s: float = 0.0,
    checkpoint_s: float = 0.0,
    borrowing: bool = False,
    grace_until_s: float | None = None,
) -> Running:
    """Running work; `on="p0-r0-n0"` or a tuple of nodes spreads the job 8 GPUs per node."""
    if allocation is None:
        nodes = (on,) if isinstance(on, str) else tuple(on or ())
        remaining, parts = the_job.gpus, []
        for node_id in nodes:
            share = min(8, remaining)
            parts.append((node_id, share))
            remaining -= share
        allocation = tuple(parts)
    return Running(the_job, allocation, start_s, progress_s, checkpoint_s, borrowing, grace_until_s)


def quota(team: str, guaranteed: int, borrow_limit: int = 10_000, **overrides: object) -> Quota:
    return replace(Quota(team, "a100", guaranteed, borrow_limit), **overrides)  # type: ignore[arg-type]


def team(team_id: str, department: str = "research", weight: float = 1.0) -> Team:
    return Team(team_id, department, weight)


@dataclass
class Scenario:
    """A fluent snapshot under construction: Scenario(fleet()).pending(...).run(now=0)."""

    nodes: tuple[Node, ...]
    running_jobs: list[Running] = field(default_factory=list)
    pending_jobs: list[Job] = field(default_factory=list)
    team_rows: list[Team] = field(default_factory=list)
    quota_rows: list[Quota] = field(default_factory=list)
    the_policy: Policy = field(default_factory=Policy)
    usage_rows: list[tuple[str, float]] = field(default_factory=list)

    def with_running(self, *runs: Running) -> Scenario:
        self.running_jobs.extend(runs)
        return self

    def pending(self, *jobs: Job) -> Scenario:
        self.pending_jobs.extend(jobs)
        return self

    def teams(self, *teams: Team) -> Scenario:
        self.team_rows.extend(teams)
        return self

    def quotas(self, *quotas: Quota) -> Scenario:
        self.quota_rows.extend(quotas)
        return self

    def policy(self, policy: Policy | None = None, **overrides: object) -> Scenario:
        self.the_policy = replace(policy or self.the_policy, **overrides)  # type: ignore[arg-type]
        return self

    def usage(self, **usage: float) -> Scenario:
        self.usage_rows.extend(usage.items())
        return self

    def build(self) -> Snapshot:
        return Snapshot(
            self.nodes,
            tuple(self.running_jobs),
            tuple(self.pending_jobs),
            tuple(self.team_rows),
            tuple(self.quota_rows),
            self.the_policy,
            tuple(self.usage_rows),
        )

    def plan(self, now: float = 0.0) -> Plan:
        return schedule(self.build(), now)


def started(plan: Plan) -> dict[str, tuple[tuple[str, int], ...]]:
    return {start.job_id: start.allocation for start in plan.starts()}


def reason_of(plan: Plan, job_id: str) -> str | None:
    status = plan.status_of(job_id)
    return None if status is None else status.reason
