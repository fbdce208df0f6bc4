from __future__ import annotations

import pytest

from scheduling.engine import Preempt, Reserve, Shrink, Start

from .builders import Scenario, fleet, job, quota, reason_of, running, started


def _one_busy_node(victim_overrides: dict[str, object], borrowing: bool = False) -> Scenario:
    victim = job("victim", 8, **victim_overrides)
    return Scenario(fleet("1x1x1x8")).with_running(running(victim, on="p0-r0-n0", borrowing=borrowing))


def test_a_higher_priority_job_preempts_lower_priority_work_and_starts_on_its_gpus_in_the_same_plan() -> None:
    plan = _one_busy_node({"priority": 0}).pending(job("urgent", 8, priority=10)).plan(now=5.0)

    assert plan.of_type(Preempt) == (Preempt("victim", "preempted-by:urgent", 30.0),)
    assert plan.starts() == (Start("urgent", (("p0-r0-n0", 8),), True, "node", ("victim",)),)
    assert plan.of_type(Reserve) == ()
    assert plan.status_of("urgent") is None


@pytest.mark.parametrize(
    ("victim", "preemptor"),
    [
        ({"priority": 10}, {"priority": 10}),
        ({"priority": 0, "preemptible": False}, {"priority": 10}),
        ({"priority": 0, "kind": "serving"}, {"priority": 10, "kind": "training"}),
        ({"priority": 0, "team": "alpha"}, {"priority": 0, "team": "alpha"}),
    ],
    ids=["equal-priority", "not-preemptible", "serving-vs-training", "same-team-same-priority"],
)
def test_a_job_never_preempts_work_it_has_no_right_to(victim: dict[str, object], preemptor: dict[str, object]) -> None:
    plan = _one_busy_node(victim).pending(job("p", 8, **preemptor)).plan()

    assert plan.of_type(Preempt) == ()


def test_serving_may_preempt_lower_priority_serving() -> None:
    plan = _one_busy_node({"priority": 0, "kind": "serving"}).pending(job("p", 8, priority=10, kind="serving")).plan()

    assert [action.job_id for action in plan.of_type(Preempt)] == ["victim"]


def test_a_team_reclaiming_its_guarantee_preempts_borrowers_whatever_their_priority() -> None:
    scenario = _one_busy_node({"priority": 50, "team": "beta"}, borrowing=True)
    # "mine" has waited a minute: on 8 GPUs, more than the victim's handover costs (it loses no work).
    plan = scenario.quotas(quota("alpha", 8)).pending(job("mine", 8, team="alpha")).plan(now=60.0)

    assert [action.job_id for action in plan.of_type(Preempt)] == ["victim"]
    assert started(plan) == {"mine": (("p0-r0-n0", 8),)}


@pytest.mark.parametrize("kind", ["training", "serving"])
def test_work_nobody_may_preempt_is_never_reclaimed_even_when_it_borrows(kind: str) -> None:
    scenario = _one_busy_node({"priority": 10, "team": "beta", "preemptible": False, "kind": kind}, borrowing=True)
    plan = scenario.quotas(quota("alpha", 8)).pending(job("mine", 8, team="alpha", priority=1, kind=kind)).plan()

    assert plan.of_type(Preempt) == ()
    assert started(plan) == {}


def test_a_higher_priority_job_of_another_team_takes_nothing_that_team_is_guaranteed() -> None:
    scenario = _one_busy_node({"priority": 0, "team": "beta"}).quotas(quota("beta", 8))
    plan = scenario.pending(job("urgent", 8, team="alpha", priority=10)).plan()

    assert plan.of_type(Preempt) == ()
    assert started(plan) == {}


def test_a_higher_priority_job_of_another_team_takes_what_that_team_borrows() -> None:
    scenario = _one_busy_node({"priority": 0, "team": "beta"}, borrowing=True).quotas(quota("beta", 0))
    plan = scenario.pending(job("urgent", 8, team="alpha", priority=10)).plan()

    assert [action.job_id for action in plan.of_type(Preempt)] == ["victim"]
    assert started(plan) == {"urgent": (("p0-r0-n0", 8),)}


def test_a_team_beyond_its_guarantee_does_not_preempt_borrowers() -> None:
    scenario = _one_busy_node({"priority": 50, "team": "beta", "preemptible": False}, borrowing=True)
    plan = scenario.quotas(quota("alpha", 0)).pending(job("mine", 8, team="alpha")).plan()

    assert plan.of_type(Preempt) == ()


def test_the_victim_set_that_loses_the_least_work_since_its_checkpoint_is_chosen() -> None:
    scenario = Scenario(fleet("1x1x2x8")).with_running(
        running(job("costly", 8), on="p0-r0-n0", progress_s=500.0, checkpoint_s=100.0),
        running(job("cheap", 8), on="p0-r0-n1", progress_s=500.0, checkpoint_s=490.0),
    )
    plan = scenario.pending(job("urgent", 8, priority=10)).plan()

    assert [action.job_id for action in plan.of_type(Preempt)] == ["cheap"]


def test_an_elastic_victim_shrinks_before_anyone_is_evicted() -> None:
    scenario = Scenario(fleet("1x1x2x8")).with_running(
        running(job("elastic", 8, min_gpus=4, max_gpus=8), on="p0-r0-n0"),
        running(job("rigid", 8), on="p0-r0-n1"),
    )
    plan = scenario.pending(job("urgent", 4, priority=10)).plan()

    assert plan.of_type(Preempt) == ()
    assert plan.of_type(Shrink) == (Shrink("elastic", (("p0-r0-n0", 4),), 4),)


def test_a_gang_preempts_whole_nodes_in_one_rack() -> None:
    scenario = Scenario(fleet("1x2x2x8")).with_running(
        *(
            running(job(f"v{i}", 8), on=node, progress_s=10.0 * (i + 1))
            for i, node in enumerate(["p0-r0-n0", "p0-r0-n1", "p0-r1-n0", "p0-r1-n1"])
        )
    )
    plan = scenario.pending(job("gang", 16, priority=10)).plan()

    assert sorted(action.job_id for action in plan.of_type(Preempt)) == ["v0", "v1"]
    assert started(plan) == {"gang": (("p0-r0-n0", 8), ("p0-r0-n1", 8))}


def test_work_already_in_its_grace_period_is_not_preempted_twice() -> None:
    scenario = Scenario(fleet("1x1x1x8")).with_running(running(job("leaving", 8), on="p0-r0-n0", grace_until_s=20.0))
    plan = scenario.pending(job("urgent", 8, priority=10)).plan(now=5.0)

    assert plan.of_type(Preempt) == ()
    assert plan.of_type(Reserve) == (Reserve("urgent", ("p0-r0-n0",), 20.0),)


def test_backfill_does_not_steal_gpus_freed_for_a_preemptor() -> None:
    scenario = Scenario(fleet("1x1x1x8")).with_running(running(job("victim", 4), on="p0-r0-n0"))
    plan = scenario.pending(job("urgent", 8, priority=10), job("small", 4, submit_s=1, time_limit_s=1e6)).plan()

    assert [action.job_id for action in plan.of_type(Preempt)] == ["victim"]
    assert started(plan) == {"urgent": (("p0-r0-n0", 8),)}
    assert reason_of(plan, "small") == "capacity"


def test_gpus_a_victim_leaves_beside_its_preemptor_come_free_only_when_its_grace_is_over() -> None:
    # The victim holds the whole node and stops within 30 s; the 4-GPU preemptor waits that out as
    # its handover. The 1-GPU job may not start on the victim's other GPUs meanwhile: it is told
    # they free at 40 (the grace over), not started at once beside a victim still checkpointing.
    scenario = Scenario(fleet("1x1x1x8")).with_running(running(job("victim", 8, time_limit_s=200.0), on="p0-r0-n0"))
    urgent, small = job("urgent", 4, priority=5, time_limit_s=10.0), job("small", 1, time_limit_s=10.0)
    plan = scenario.pending(urgent, small).plan(now=10.0)

    assert plan.of_type(Preempt) == (Preempt("victim", "preempted-by:urgent", 30.0),)
    assert started(plan) == {"urgent": (("p0-r0-n0", 4),)}
    assert plan.of_type(Reserve) == (Reserve("small", ("p0-r0-n0",), 40.0),)


def test_gpus_free_before_an_eviction_stay_free_for_others_during_its_grace() -> None:
    # The victim holds 6 of the node's 8 GPUs; the 6-GPU preemptor takes the victim's, so the two
    # GPUs that were free already stay free: the 1-GPU job starts on one at once.
    scenario = Scenario(fleet("1x1x1x8")).with_running(running(job("victim", 6, time_limit_s=200.0), on="p0-r0-n0"))
    urgent, small = job("urgent", 6, priority=5, time_limit_s=10.0), job("small", 1, time_limit_s=10.0)
    plan = scenario.pending(urgent, small).plan(now=10.0)

    assert plan.of_type(Preempt) == (Preempt("victim", "preempted-by:urgent", 30.0),)
    assert started(plan) == {"urgent": (("p0-r0-n0", 6),), "small": (("p0-r0-n0", 1),)}


def test_preemption_off_means_no_victims() -> None:
    plan = _one_busy_node({"priority": 0}).policy(preemption=False).pending(job("urgent", 8, priority=10)).plan()

    assert plan.of_type(Preempt) == ()


@pytest.mark.parametrize("borrowing", [False, True], ids=["own", "borrowed-but-nobody-guaranteed"])
def test_a_job_with_nothing_it_may_take_does_not_use_up_the_cycles_preemption_attempts(borrowing: bool) -> None:
    scenario = Scenario(fleet("1x1x2x8") + fleet("1x1x1x8", "h100", prefix="h")).policy(max_preemption_attempts=1)
    scenario.with_running(
        running(job("keep-a", 4, preemptible=False), on="p0-r0-n0", borrowing=borrowing),
        running(job("keep-b", 4, preemptible=False), on="p0-r0-n1", borrowing=borrowing),
        running(job("victim", 8, accelerator="h100"), on="hp0-r0-n0"),
    )
    # "stuck" comes first: 8 GPUs are free, but in halves, and nothing there is preemptible.
    plan = scenario.pending(job("stuck", 8, priority=10), job("urgent", 8, priority=5, accelerator="h100")).plan()

    assert plan.of_type(Preempt) == (Preempt("victim", "preempted-by:urgent", 30.0),)
    assert reason_of(plan, "stuck") == "topology"


def test_a_gang_no_search_can_place_leaves_scan_budget_for_the_preemptors_after_it() -> None:
    # Each rack holds one node of work nobody may preempt, so no rack can ever hold "gang"; its
    # search would look at every cheap victim. One search spends at most a quarter of the budget.
    scenario = Scenario(fleet("1x2x2x8")).policy(preemption_scan_budget=16, reservation_depth=0)
    scenario.with_running(
        running(job("wall-0", 8, preemptible=False), on="p0-r0-n0"),
        running(job("wall-1", 8, preemptible=False), on="p0-r1-n0"),
        *(running(job(f"v{index:02d}", 1), on=f"p0-r{index // 8}-n1") for index in range(16)),
    )
    gang = job("gang", 16, priority=10, required_level="rack", submit_s=0.0)
    plan = scenario.pending(gang, job("small", 1, priority=10, submit_s=1.0)).plan()

    assert plan.of_type(Preempt) == (Preempt("v00", "preempted-by:small", 30.0),)
    assert reason_of(plan, "gang") == "capacity"


# A priority class that may not preempt (Kubernetes' preemptionPolicy: Never): its jobs wait for
# room and never evict or shrink anyone, but they remain victims as their own class says.


@pytest.mark.parametrize(
    ("victim", "preemptor", "reclaims"),
    [
        ({"priority": 0}, {"priority": 10}, False),
        ({"priority": 50, "team": "beta"}, {"priority": 0, "team": "alpha"}, True),
        ({"priority": 0, "kind": "serving"}, {"priority": 10, "kind": "serving"}, False),
    ],
    ids=["lower-priority", "reclaiming-a-loan", "serving-vs-serving"],
)
def test_a_job_whose_class_may_not_preempt_evicts_nobody_and_waits(
    victim: dict[str, object], preemptor: dict[str, object], reclaims: bool
) -> None:
    scenario = _one_busy_node(victim, borrowing=reclaims)
    if reclaims:
        scenario.quotas(quota("alpha", 8))
    plan = scenario.pending(job("polite", 8, may_preempt=False, **preemptor)).plan()

    assert plan.of_type(Preempt) == ()
    assert started(plan) == {}
    assert plan.of_type(Reserve) == (Reserve("polite", ("p0-r0-n0",), 3600.0),)


def test_a_job_whose_class_may_not_preempt_shrinks_no_elastic_work() -> None:
    scenario = Scenario(fleet("1x1x2x8")).with_running(
        running(job("elastic", 8, min_gpus=4, max_gpus=8), on="p0-r0-n0"),
        running(job("rigid", 8), on="p0-r0-n1"),
    )
    plan = scenario.pending(job("polite", 4, priority=10, may_preempt=False)).plan()

    assert plan.of_type(Shrink) == ()
    assert plan.of_type(Preempt) == ()
    assert reason_of(plan, "polite") == "capacity"


def test_a_job_whose_class_may_not_preempt_is_still_a_victim_of_higher_priority_work() -> None:
    plan = _one_busy_node({"priority": 0, "may_preempt": False}).pending(job("urgent", 8, priority=10)).plan()

    assert [action.job_id for action in plan.of_type(Preempt)] == ["victim"]
    assert started(plan) == {"urgent": (("p0-r0-n0", 8),)}


def test_a_job_that_may_not_preempt_leaves_the_cycles_preemption_attempts_to_the_jobs_after_it() -> None:
    scenario = Scenario(fleet("1x1x1x8") + fleet("1x1x1x8", "h100", prefix="h")).policy(max_preemption_attempts=1)
    scenario.with_running(
        running(job("kept", 8), on="p0-r0-n0"),
        running(job("victim", 8, accelerator="h100"), on="hp0-r0-n0"),
    )
    plan = scenario.pending(
        job("polite", 8, priority=10, may_preempt=False), job("urgent", 8, priority=5, accelerator="h100")
    ).plan()

    assert plan.of_type(Preempt) == (Preempt("victim", "preempted-by:urgent", 30.0),)
