"""Hypothesis strategies: small random fleets with feasible running work and random queues."""

from __future__ import annotations

from hypothesis import strategies as st

from scheduling.engine import Job, Node, Policy, Quota, Running, Snapshot, Team

TEAMS = ("alpha", "beta", "gamma")
DEPARTMENTS = {"alpha": "research", "beta": "research", "gamma": "product"}


@st.composite
def jobs(draw: st.DrawFn, job_id: str, submit_s: float) -> Job:
    gpus = draw(st.sampled_from((1, 2, 4, 8, 8, 16, 24)))
    kind = draw(st.sampled_from(("training", "training", "batch", "serving")))
    elastic = draw(st.booleans()) and gpus >= 2
    duration = draw(st.floats(10.0, 1000.0))
    return Job(
        id=job_id,
        team=draw(st.sampled_from(TEAMS)),
        kind=kind,
        priority=draw(st.sampled_from((0, 5, 10))) + (100 if kind == "serving" else 0),
        preemptible=draw(st.booleans()),
        accelerator="a100",
        gpus=gpus,
        duration_s=duration,
        submit_s=submit_s,
        time_limit_s=duration * draw(st.floats(1.0, 2.0)),
        min_gpus=gpus // 2 if elastic else None,
        max_gpus=gpus * 2 if elastic else None,
        checkpoint_interval_s=draw(st.sampled_from((None, 50.0))),
        required_level=draw(st.sampled_from((None, None, "rack"))),
    )


@st.composite
def snapshots(draw: st.DrawFn, policy: Policy | None = None) -> Snapshot:
    pods, racks, per_rack = draw(st.integers(1, 2)), draw(st.integers(1, 2)), draw(st.integers(1, 3))
    nodes = tuple(
        Node(
            f"p{p}-r{r}-n{n}",
            f"p{p}",
            f"r{r}",
            "a100",
            8,
            draw(st.sampled_from((8, 8, 8, 6))),
            draw(st.booleans()) and n == 2,
        )
        for p in range(pods)
        for r in range(racks)
        for n in range(per_rack)
    )
    running: list[Running] = []
    free = {node.id: (node.healthy_gpus if not node.cordoned else 0) for node in nodes}
    for index in range(draw(st.integers(0, 6))):
        job = draw(jobs(f"r{index}", 0.0))
        gpus = min(job.gpus, 8)
        node_id = draw(st.sampled_from([node.id for node in nodes]))
        if free[node_id] < gpus:
            continue
        free[node_id] -= gpus
        job = Job(
            **{
                **{f: getattr(job, f) for f in job.__dataclass_fields__},
                "gpus": gpus,
                "min_gpus": None,
                "max_gpus": None,
            }
        )
        progress = draw(st.floats(0.0, job.duration_s))
        running.append(Running(job, ((node_id, gpus),), 0.0, progress, progress * 0.5, draw(st.booleans())))
    pending = tuple(draw(jobs(f"j{index}", float(index))) for index in range(draw(st.integers(0, 8))))
    teams = tuple(Team(team, DEPARTMENTS[team], draw(st.sampled_from((1.0, 2.0)))) for team in TEAMS)
    quotas = tuple(
        Quota(team, "a100", draw(st.integers(0, 16)), draw(st.integers(0, 24)), draw(st.sampled_from((None, 0, 8))))
        for team in TEAMS
        if draw(st.booleans())
    )
    usage = tuple((team, draw(st.floats(0.0, 1e6))) for team in TEAMS)
    chosen = policy or draw(st.sampled_from((Policy(), Policy.easy(), Policy.fifo(), Policy(reservation_depth=2))))
    return Snapshot(nodes, tuple(running), pending, teams, quotas, chosen, usage)
