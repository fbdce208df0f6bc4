"""The one thing that holds each pending job (`Plan.blockers`): which limit, how many GPUs short,
the job ahead, the node, rack or pod. Each kind on a scenario of its own, in facts and in words;
and the fast engine tells the same blockers as the reference under Hypothesis."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduling.engine import Plan, Policy, Snapshot, schedule, schedule_reference
from scheduling.engine.blockers import blocker_text
from scheduling.engine.plan import Blocker
from scheduling.engine.reference import FAST_PATH_QUIRKS

from .builders import Scenario, fleet, job, quota, running, team
from .strategies import contested_snapshots, gang_snapshots, snapshots


def _blocker(scenario: Scenario, job_id: str, now: float = 0.0) -> Blocker:
    snapshot = scenario.build()
    return schedule(snapshot, now).blockers(snapshot.pending)[job_id]


def _words(blocker: Blocker) -> str:
    return blocker_text(blocker, team="Vision", job="train-llm (#7)", where="rack r1 of pod p0")


def test_a_job_larger_than_its_teams_limit_names_the_limit_and_the_gpus_beyond_it() -> None:
    scenario = Scenario(fleet("1x1x4x8")).quotas(quota("alpha", 8, 8)).pending(job("huge", 24))

    blocker = _blocker(scenario, "huge")

    assert blocker == Blocker("team-size", "a100", 24, short=8, have=0, limit=16, team="alpha")
    assert _words(blocker) == (
        "it needs 24 a100 GPUs, 8 more than Vision may ever hold (16: guarantee plus borrow limit)"
    )


def test_a_job_over_its_teams_limit_names_what_the_team_holds_and_how_many_gpus_it_is_short() -> None:
    scenario = Scenario(fleet("1x1x4x8")).quotas(quota("alpha", 8, 8))
    scenario.with_running(running(job("mine", 12), (("p0-r0-n0", 8), ("p0-r0-n1", 4)), borrowing=True))

    blocker = _blocker(scenario.pending(job("more", 8)), "more")

    assert blocker == Blocker("team-limit", "a100", 8, short=4, have=12, limit=16, team="alpha")
    assert _words(blocker) == (
        "Vision holds 12 of the 16 a100 GPUs it may use (guarantee plus borrow limit): 4 GPUs short for this job's 8"
    )


def test_a_job_behind_its_teams_job_that_waited_longer_names_that_job() -> None:
    # alpha may use 16 and uses 12: "big" keeps its 8 within the limit, so "small" (2) waits for it.
    lent = running(job("lent", 12, time_limit_s=3600.0), (("p0-r0-n0", 8), ("p0-r0-n1", 4)), borrowing=True)
    scenario = Scenario(fleet("1x1x4x8")).policy(quota_hold_after_s=0.0).quotas(quota("alpha", 8, 8)).with_running(lent)
    scenario.pending(job("big", 8, submit_s=1.0), job("small", 2, submit_s=2.0))

    blocker = _blocker(scenario, "small", now=10.0)

    assert blocker == Blocker("quota-held", "a100", 2, short=6, have=12, limit=8, team="alpha", job_id="big")
    assert _words(blocker) == (
        "Vision's quota is kept for train-llm (#7), which has waited longer: the team's other jobs may hold 8 "
        "a100 GPUs, 12 are in use, 6 short for this job's 2"
    )


def test_a_borrower_that_other_teams_lend_too_little_names_what_they_lend() -> None:
    # beta's idle 16-GPU guarantee lends nothing (lend limit 0): alpha may borrow up to 116 by its
    # own limit, but only the 0 GPUs nobody is guaranteed are there to lend.
    scenario = Scenario(fleet("1x1x4x8")).teams(team("alpha"), team("beta"))
    scenario.quotas(quota("alpha", 16, 100), quota("beta", 16, 0, lend_limit=0)).pending(job("j", 24))

    blocker = _blocker(scenario, "j")

    assert blocker == Blocker("borrowing", "a100", 24, short=8, have=0, limit=16, team="alpha")
    assert _words(blocker) == (
        "beyond Vision's guarantee it must borrow, and other teams lend only 0 a100 GPUs now: 8 short for this job's 24"
    )


def test_unpreemptible_work_beyond_its_guarantee_names_the_unguaranteed_gpus_in_use() -> None:
    serving = {"kind": "serving", "priority": 100, "preemptible": False}
    scenario = Scenario(fleet("1x1x3x8")).quotas(quota("alpha", 8, 16), quota("beta", 8, 0))
    scenario.with_running(
        running(job("own", 8, **serving), on="p0-r0-n0"),
        running(job("lent", 8, **serving), on="p0-r0-n1", borrowing=True),
    )

    blocker = _blocker(scenario.pending(job("more", 8, **serving)), "more")

    assert blocker == Blocker("guarantee", "a100", 8, short=8, have=8, limit=8, team="alpha")


def test_a_job_held_back_by_strict_order_names_the_job_ahead_of_it() -> None:
    scenario = Scenario(fleet("1x1x1x8")).with_running(running(job("r", 8, time_limit_s=100.0), on="p0-r0-n0"))
    scenario.policy(Policy.fifo()).pending(job("head", 8), job("short", 4, submit_s=1, time_limit_s=1.0))

    blocker = _blocker(scenario, "short")

    assert blocker == Blocker("priority", "a100", 4, job_id="head")
    assert _words(blocker) == "train-llm (#7) is ahead of it in the queue for a100 GPUs and goes first"


def test_a_job_with_too_few_free_gpus_names_how_many_are_missing() -> None:
    scenario = Scenario(fleet("1x1x2x8")).policy(reservation_depth=0)
    scenario.with_running(running(job("r", 14, time_limit_s=100.0), (("p0-r0-n0", 8), ("p0-r0-n1", 6))))
    scenario.pending(job("first", 4, time_limit_s=50.0), job("second", 4, submit_s=1.0, time_limit_s=50.0))

    blockers = schedule(scenario.build(), 0.0).blockers(scenario.build().pending)

    assert blockers["first"] == Blocker("capacity", "a100", 4, short=2, have=2)
    assert blockers["second"] == Blocker("capacity", "a100", 4, short=2, have=2, job_id="first")
    assert _words(blockers["first"]) == "2 more a100 GPUs must free up (2 free now)"
    assert _words(blockers["second"]) == "2 more a100 GPUs must free up (2 free now); train-llm (#7) is ahead of it"


def test_a_gang_that_must_stay_in_a_rack_names_the_closest_rack() -> None:
    # Two racks of two nodes: one node free in each, so 16 GPUs are free but no rack has two nodes.
    scenario = Scenario(fleet("1x2x2x8"))
    scenario.with_running(
        running(job("a", 8, time_limit_s=100.0), on="p0-r0-n0"),
        running(job("b", 8, time_limit_s=100.0), on="p0-r1-n0"),
    )

    blocker = _blocker(scenario.pending(job("gang", 16, required_level="rack")), "gang")

    assert blocker == Blocker("topology", "a100", 16, short=8, have=8, level="rack", domain="p0/r0")
    assert _words(blocker) == (
        "it needs 16 GPUs together in one rack: the closest, rack r1 of pod p0, has 8 free, 8 short"
    )


def test_a_job_behind_a_reservation_names_the_job_and_the_node_reserved_for_it() -> None:
    scenario = Scenario(fleet("1x1x1x8")).with_running(running(job("r", 4, time_limit_s=100.0), (("p0-r0-n0", 4),)))
    scenario.pending(job("head", 8, time_limit_s=300.0), job("long", 4, submit_s=1, time_limit_s=500.0))

    blocker = _blocker(scenario, "long")

    assert blocker == Blocker("reserved", "a100", 4, job_id="head", level="node", domain="p0-r0-n0")
    assert _words(blocker) == (
        "the GPUs it would use, on rack r1 of pod p0, are reserved for train-llm (#7), which starts first"
    )


def test_telling_blockers_changes_nothing_the_plan_decided() -> None:
    scenario = Scenario(fleet("1x1x4x8")).quotas(quota("alpha", 8, 8)).pending(job("huge", 24), job("s", 2))
    snapshot = scenario.build()
    plan = schedule(snapshot, 0.0)
    before = (plan.actions, plan.pending)

    plan.blockers(snapshot.pending)

    assert (plan.actions, plan.pending) == before == (schedule(snapshot, 0.0).actions, schedule(snapshot, 0.0).pending)


SETTINGS = settings(max_examples=100, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])


def _same_blockers(snapshot: Snapshot, now: float) -> None:
    fast: Plan = schedule(snapshot, now)
    plain: Plan = schedule_reference(snapshot, now, quirks=FAST_PATH_QUIRKS)
    assert fast.blockers(snapshot.pending) == plain.blockers(snapshot.pending)
    assert set(fast.blockers(snapshot.pending)) == {status.job_id for status in fast.pending}


@SETTINGS
@given(snapshots(), st.floats(0.0, 5000.0))
def test_the_fast_engine_tells_the_blockers_the_reference_tells(snapshot: Snapshot, now: float) -> None:
    _same_blockers(snapshot, now)


@SETTINGS
@given(gang_snapshots(), st.floats(0.0, 5000.0))
def test_the_fast_engine_tells_the_blockers_the_reference_tells_around_running_gangs(
    snapshot: Snapshot, now: float
) -> None:
    _same_blockers(snapshot, now)


@SETTINGS
@given(contested_snapshots(), st.floats(0.0, 300.0))
def test_the_fast_engine_tells_the_blockers_the_reference_tells_on_a_contested_fleet(
    snapshot: Snapshot, now: float
) -> None:
    _same_blockers(snapshot, now)
