"""Hypothesis strategies: small random fleets with feasible running work and random queues."""

from __future__ import annotations

from dataclasses import replace

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
        requeued_by_failure=draw(st.sampled_from((False, False, False, True))),
    )


@st.composite
def snapshots(draw: st.DrawFn, policy: Policy | None = None, max_running: int = 6) -> Snapshot:
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
    for index in range(draw(st.integers(0, max_running))):
        job = draw(jobs(f"r{index}", 0.0))
        gpus = min(job.gpus, 8)
        node_id = draw(st.sampled_from([node.id for node in nodes]))
        if free[node_id] < gpus:
            continue
        free[node_id] -= gpus
        job = replace(job, gpus=gpus, min_gpus=None, max_gpus=None)
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
    chosen = policy or draw(
        st.sampled_from(
            (
                Policy(),
                Policy.easy(),
                Policy.fifo(),
                Policy(reservation_depth=2),
                Policy(queue_order="shortest_limit", max_age_s=4.0),
                Policy(age_weight=0.0, max_age_s=4.0),
                Policy(least_borrowed_first=False),
                Policy(max_share_of_lender=0.5),
            )
        )
    )
    return Snapshot(nodes, tuple(running), pending, teams, quotas, chosen, usage)


@st.composite
def gang_snapshots(draw: st.DrawFn, max_running: int = 6) -> Snapshot:
    """snapshots() with multi-node gangs running on idle nodes too, some without a time limit, some
    elastic (victims to shrink), across racks and pods (slowed down by their placement)."""
    base = draw(snapshots(max_running=max_running))
    busy = {node_id for run in base.running for node_id, _ in run.allocation}
    idle = [node for node in base.nodes if node.id not in busy and node.usable_gpus == 8]
    gangs: list[Running] = []
    while len(idle) >= 2 and draw(st.booleans()):
        span = idle[: draw(st.integers(2, min(3, len(idle))))]
        idle = idle[len(span) :]
        gpus = 8 * len(span)
        job = draw(jobs(f"g{len(gangs)}", 0.0))
        job = replace(job, gpus=gpus, min_gpus=draw(st.sampled_from((None, 8))), max_gpus=None)
        job = replace(job, time_limit_s=draw(st.sampled_from((None, job.duration_s * 2))), required_level=None)
        progress = draw(st.floats(0.0, job.duration_s))
        # Without a time limit, some show the release their anchor gives (as `FleetState` does).
        release_s = draw(st.none() | st.floats(0.0, 2 * job.duration_s)) if job.time_limit_s is None else None
        span_ids = tuple((node.id, 8) for node in span)
        run = Running(job, span_ids, 0.0, progress, progress / 2, draw(st.booleans()), release_s=release_s)
        gangs.append(run)
    policy = replace(
        base.policy,
        level_penalty=(("node", 1.0), ("rack", 1.1), ("pod", 1.3), ("fleet", 1.7)),
        gang_spread_after_s=draw(st.sampled_from((7 * 86400.0, None, 3600.0))),
        guarantee_spread_after_s=draw(st.sampled_from((0.0, None, 600.0))),
        failure_spread_after_s=draw(st.sampled_from((0.0, None, 300.0))),
    )
    return replace(base, running=base.running + tuple(gangs), policy=policy)


@st.composite
def contested_snapshots(draw: st.DrawFn) -> Snapshot:
    """gang_snapshots() on a contested fleet: running work that may grow or shrink (elastic) or is
    already leaving (in its grace period) or checkpoints when told it is preempted, nodes that lost
    some or all of their GPUs, preemptors
    for whom any eviction pays (`reclaim_after_s` 0) or whose class may not preempt, reclaims by
    jobs partly beyond their guarantee (taking young loans without checkpoints or not: runs started
    at 0, 100 or 200 s, bounds of 150 s and an hour), and preemption budgets that run out."""
    base = draw(gang_snapshots(max_running=24))
    running = []
    for run in base.running:
        job = run.job
        if draw(st.booleans()):
            job = replace(job, min_gpus=max(1, run.gpus // 2), max_gpus=run.gpus * 2)
        if draw(st.integers(0, 3)) == 0:  # its lost work bounded without a periodic checkpoint
            job = replace(job, checkpoint_on_preempt=True)
        grace_until_s = draw(st.sampled_from((None, None, None, 0.0, 6000.0)))
        start_s = draw(st.sampled_from((0.0, 100.0, 200.0)))
        running.append(replace(run, job=job, start_s=start_s, grace_until_s=grace_until_s))
    nodes = list(base.nodes)
    for _ in range(draw(st.integers(0, 2))):
        at = draw(st.integers(0, len(nodes) - 1))
        nodes[at] = replace(nodes[at], healthy_gpus=draw(st.integers(0, 8)))
    pending = tuple(replace(job, may_preempt=draw(st.sampled_from((True, True, False)))) for job in base.pending)
    policy = replace(
        base.policy,
        reclaim_after_s=draw(st.sampled_from((None, 0.0, 4 * 3600.0))),
        reclaim_wait_credit=draw(st.sampled_from((None, 1.0, 4.0))),
        reclaim_guaranteed_share=draw(st.sampled_from((1.0, 0.5, 0.0))),
        partial_reclaim_young_s=draw(st.sampled_from((None, 150.0, 3600.0))),
        least_borrowed_first=draw(st.booleans()),
        quota_hold_after_s=draw(st.sampled_from((None, 0.0, 3.0))),
        max_preemption_attempts=draw(st.sampled_from((1, 2, 16))),
        preemption_scan_budget=draw(st.sampled_from((4, 16, 8192))),
    )
    return replace(base, nodes=tuple(nodes), running=tuple(running), pending=pending, policy=policy)
