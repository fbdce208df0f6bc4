"""The live cycle over the modelled fleet: snapshot, engine, guarded apply, ledger."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest
from django.db.models import Sum

from scheduling.cycle.snapshot import snapshot_build
from scheduling.cycle.tick import MAX_WALL_BEHIND_S, MAX_WALL_STEP_S, cycle_tick, wall_step_for
from scheduling.live.waits import job_waits_for
from scheduling.models import Allocation, FleetClock, FleetSample, Job, Node, SchedulerEvent, UsageSample
from tenants.services.policy import priority_class_save
from tests.scheduling.conftest import T0, Fleet


def _allocated(job: Job) -> dict[str, int]:
    return dict(Allocation.objects.filter(job=job).values_list("node__name", "gpus"))


def test_a_tick_starts_a_pending_gang_whole_and_books_its_nodes(fleet: Fleet) -> None:
    job = fleet.submit(gpus=16)

    fleet.tick()

    job.refresh_from_db()
    assert job.state == Job.State.RUNNING
    assert sorted(_allocated(job).values()) == [8, 8]
    assert job.placement_level == "rack"
    assert Node.objects.aggregate(total=Sum("allocated_gpus"))["total"] == 16
    assert SchedulerEvent.objects.filter(job=job, kind=SchedulerEvent.Kind.STARTED).count() == 1


def test_the_clock_advances_by_wall_time_times_speed(fleet: Fleet) -> None:
    before = FleetClock.objects.get().sim_now_s

    fleet.tick(wall_step_s=2.0, speed=60.0)

    assert FleetClock.objects.get().sim_now_s == pytest.approx(before + 120.0)


def test_a_job_completes_when_its_work_is_done_and_frees_its_gpus(fleet: Fleet) -> None:
    job = fleet.submit(gpus=8, duration_s=90.0)
    fleet.tick()
    fleet.tick()  # 60 s of work
    job.refresh_from_db()
    assert job.state == Job.State.RUNNING

    fleet.tick()  # 120 s: done at 90 s

    job.refresh_from_db()
    assert job.state == Job.State.COMPLETED
    assert job.finished_s == pytest.approx(job.started_s + 90.0)
    assert not Allocation.objects.filter(job=job).exists()
    assert Node.objects.aggregate(total=Sum("allocated_gpus"))["total"] == 0


def test_a_job_is_killed_at_its_time_limit(fleet: Fleet) -> None:
    job = fleet.submit(gpus=8, duration_s=3600.0, time_limit_s=100.0)
    fleet.tick()
    fleet.tick()
    fleet.tick()

    job.refresh_from_db()
    assert job.state == Job.State.TIMED_OUT
    assert Node.objects.aggregate(total=Sum("allocated_gpus"))["total"] == 0


def test_a_gang_that_does_not_fit_stays_pending_with_a_reason_and_an_estimate(fleet: Fleet) -> None:
    running = fleet.submit(gpus=32, duration_s=600.0, time_limit_s=600.0, name="big")
    fleet.tick()
    waiting = fleet.submit(gpus=16, name="waits")

    fleet.tick()

    waiting.refresh_from_db()
    running.refresh_from_db()
    assert waiting.state == Job.State.PENDING
    info = job_waits_for(job_ids=[waiting.pk])[waiting.pk]
    assert info.reason.startswith(("reserved-for:", "capacity"))
    assert info.estimated_start_s == pytest.approx(running.started_s + 600.0, abs=1.0)


def test_a_job_over_its_team_quota_waits_with_reason_quota(fleet: Fleet) -> None:
    from tests.factories import QuotaFactory, TeamFactory

    small = TeamFactory(name="Small", slug="small")
    QuotaFactory(team=small, accelerator_type=fleet.accelerator, guaranteed=0, borrow_limit=8)
    fleet.submit(gpus=8, team=small, name="first")
    fleet.tick()
    second = fleet.submit(gpus=8, team=small, name="second")

    fleet.tick()

    second.refresh_from_db()
    assert second.state == Job.State.PENDING
    assert job_waits_for(job_ids=[second.pk])[second.pk].reason == "quota"


def test_a_stale_fencing_token_writes_nothing(fleet: Fleet) -> None:
    job = fleet.submit(gpus=8)
    fleet.token += 5
    fleet.tick()
    job.refresh_from_db()
    assert job.state == Job.State.RUNNING
    clock = FleetClock.objects.get()

    assert cycle_tick(token=1, wall_now=T0 + timedelta(seconds=99)) is None
    assert FleetClock.objects.get().ticks == clock.ticks


def test_a_token_that_already_ticked_cannot_tick_again(fleet: Fleet, caplog: pytest.LogCaptureFixture) -> None:
    fleet.tick()
    clock = FleetClock.objects.get()

    with caplog.at_level(logging.WARNING, logger="fleetline.cycle"):
        assert cycle_tick(token=fleet.token, wall_now=T0 + timedelta(seconds=fleet.wall_s + 1)) is None

    assert FleetClock.objects.get().ticks == clock.ticks
    # The cycle's own records: the channel layer may log on its own (a group over capacity).
    records = [record for record in caplog.records if record.name == "fleetline.cycle"]
    assert [record.levelno for record in records] == [logging.WARNING]
    assert "stale tick refused" in records[0].getMessage()


def test_a_stall_is_caught_up_over_the_following_ticks_in_bounded_steps(fleet: Fleet) -> None:
    start = FleetClock.objects.get().sim_now_s

    fleet.tick(wall_step_s=20.0, speed=60.0)  # the cycle stood still for 20 s
    for _ in range(6):
        fleet.tick(wall_step_s=1.0, speed=60.0)

    ticks = [tick for tick in fleet.ticks[-7:] if tick is not None]
    assert [tick.sim_to_s - tick.sim_from_s for tick in ticks] == pytest.approx([300, 300, 300, 300, 240, 60, 60])
    assert [tick.wall_behind_s for tick in ticks] == pytest.approx([15, 11, 7, 3, 0, 0, 0])
    assert FleetClock.objects.get().sim_now_s == pytest.approx(start + 26 * 60.0)
    assert FleetClock.objects.get().wall_updated_at == T0 + timedelta(seconds=fleet.wall_s)


def test_an_outage_longer_than_the_catch_up_limit_loses_only_the_excess_and_says_so(
    fleet: Fleet, caplog: pytest.LogCaptureFixture
) -> None:
    start = FleetClock.objects.get().sim_now_s

    with caplog.at_level(logging.WARNING, logger="fleetline.cycle"):
        result = fleet.tick(wall_step_s=MAX_WALL_BEHIND_S + 3600.0, speed=60.0)

    assert result is not None
    assert result.sim_to_s == pytest.approx(start + MAX_WALL_STEP_S * 60.0)
    assert result.wall_behind_s == pytest.approx(MAX_WALL_BEHIND_S - MAX_WALL_STEP_S)
    [warning] = [record for record in caplog.records if record.name == "fleetline.cycle"]
    assert warning.levelno == logging.WARNING
    assert "dropping 3600 s" in warning.getMessage()
    behind = timedelta(seconds=result.wall_behind_s)
    assert FleetClock.objects.get().wall_updated_at == T0 + timedelta(seconds=fleet.wall_s) - behind


def test_a_worker_whose_clock_runs_behind_never_moves_the_fleet_clock_back(fleet: Fleet) -> None:
    fleet.tick()
    before = FleetClock.objects.get()

    result = cycle_tick(token=fleet.token + 1, wall_now=before.wall_updated_at - timedelta(seconds=3), speed=60.0)

    assert result is not None
    after = FleetClock.objects.get()
    assert after.sim_now_s == before.sim_now_s
    assert after.wall_updated_at == before.wall_updated_at


@pytest.mark.parametrize(
    ("owed_s", "step_s", "behind_s", "dropped_s"),
    [
        (0.5, 0.5, 0.0, 0.0),
        (MAX_WALL_STEP_S, MAX_WALL_STEP_S, 0.0, 0.0),
        (20.0, MAX_WALL_STEP_S, 20.0 - MAX_WALL_STEP_S, 0.0),
        (MAX_WALL_BEHIND_S, MAX_WALL_STEP_S, MAX_WALL_BEHIND_S - MAX_WALL_STEP_S, 0.0),
        (MAX_WALL_BEHIND_S + 100.0, MAX_WALL_STEP_S, MAX_WALL_BEHIND_S - MAX_WALL_STEP_S, 100.0),
        (-3.0, 0.0, 0.0, 0.0),
    ],
)
def test_the_clock_rule_accounts_for_owed_wall_time_in_bounded_steps(
    owed_s: float, step_s: float, behind_s: float, dropped_s: float
) -> None:
    wall_now = T0 + timedelta(hours=1)
    accounted_to = wall_now - timedelta(seconds=owed_s)

    step = wall_step_for(accounted_to=accounted_to, wall_now=wall_now)

    assert (step.step_s, step.behind_s, step.dropped_s) == pytest.approx((step_s, behind_s, dropped_s))
    # Accounted time moves forward by what was stepped and dropped, never backwards.
    assert step.accounted_to == accounted_to + timedelta(seconds=step_s + dropped_s)


def test_the_first_tick_starts_the_clock_at_its_wall_time() -> None:
    step = wall_step_for(accounted_to=None, wall_now=T0)

    assert (step.step_s, step.behind_s, step.accounted_to) == (0.0, 0.0, T0)


def test_each_tick_records_the_usage_ledger_and_a_fleet_sample(fleet: Fleet) -> None:
    fleet.submit(gpus=8)
    fleet.tick()
    fleet.tick()

    sample = FleetSample.objects.order_by("-id").first()
    assert sample is not None
    assert sample.training_gpus == 8
    assert sample.capacity_gpus == 32
    assert sample.idle_gpu_s == pytest.approx(24 * 60.0)
    usage = UsageSample.objects.order_by("-id").first()
    assert usage is not None
    assert usage.team_id == fleet.team.pk
    assert usage.allocated_gpu_s == pytest.approx(8 * 60.0)


def test_the_snapshot_takes_the_same_number_of_queries_for_one_job_or_many(
    fleet: Fleet, django_assert_num_queries: object
) -> None:
    fleet.submit(gpus=8)
    with django_assert_num_queries(8):  # type: ignore[operator]
        snapshot_build(sim_now_s=0.0)
    for _ in range(20):
        fleet.submit(gpus=8)
    fleet.tick()
    with django_assert_num_queries(8):  # type: ignore[operator]
        loaded = snapshot_build(sim_now_s=0.0)
    assert len(loaded.jobs) == 21


def test_serving_growth_preempts_training_which_hands_its_gpus_over_during_its_grace_period(fleet: Fleet) -> None:
    training = fleet.submit(gpus=32, duration_s=36000.0, checkpoint_interval_s=600.0, name="pretrain")
    fleet.tick()
    training.refresh_from_db()
    assert training.state == Job.State.RUNNING

    serving = fleet.submit(gpus=8, kind="serving", priority_class_id=fleet.serving.pk, name="api")
    fleet.tick()
    training.refresh_from_db()
    serving.refresh_from_db()
    # The eviction and the start it makes room for are one decision: the serving job holds the GPUs
    # at once and makes progress once the 60 s grace period (the training job's handover) is over.
    assert serving.state == Job.State.RUNNING
    assert serving.anchor_s == serving.started_s + 60.0
    assert training.state == Job.State.PENDING and training.restarts == 1
    assert SchedulerEvent.objects.filter(job=training, kind=SchedulerEvent.Kind.EVICTED).exists()
    # Its start message says what the 60 s are: the handover, not a checkpoint restore.
    started = SchedulerEvent.objects.get(job=serving, kind=SchedulerEvent.Kind.STARTED)
    assert "taking over preempted jobs' GPUs after 60 s" in started.message
    assert "restoring" not in started.message


@pytest.mark.parametrize(
    ("checkpoint_interval_s", "rolled_back_to"), [(None, "rolled back to its start"), (60.0, "its last checkpoint")]
)
def test_an_eviction_says_whether_the_work_went_back_to_a_checkpoint_or_to_the_start(
    fleet: Fleet, checkpoint_interval_s: float | None, rolled_back_to: str
) -> None:
    training = fleet.submit(gpus=32, duration_s=36000.0, checkpoint_interval_s=checkpoint_interval_s)
    for _ in range(4):
        fleet.tick()
    fleet.submit(gpus=8, kind="serving", priority_class_id=fleet.serving.pk, name="api")
    fleet.tick()

    evicted = SchedulerEvent.objects.get(job=training, kind=SchedulerEvent.Kind.EVICTED)
    assert rolled_back_to in evicted.message


def test_serving_of_a_class_that_may_not_preempt_waits_until_an_admin_lets_it_preempt(fleet: Fleet) -> None:
    training = fleet.submit(gpus=32, duration_s=36000.0, checkpoint_interval_s=600.0, name="pretrain")
    fleet.tick()
    priority_class_save(
        actor=None,
        priority_class_id=fleet.serving.pk,
        name="serving",
        value=900,
        kind="serving",
        preemptible=False,
        may_preempt=False,
    )
    serving = fleet.submit(gpus=8, kind="serving", priority_class_id=fleet.serving.pk, name="api")
    for _ in range(3):
        fleet.tick()
    training.refresh_from_db()
    serving.refresh_from_db()
    assert (training.state, serving.state) == (Job.State.RUNNING, Job.State.PENDING)

    # The class changes while the job waits: the next tick reads it (no cached engine job keeps the old one).
    priority_class_save(
        actor=None,
        priority_class_id=fleet.serving.pk,
        name="serving",
        value=900,
        kind="serving",
        preemptible=False,
        may_preempt=True,
    )
    fleet.tick()
    training.refresh_from_db()
    serving.refresh_from_db()
    assert (training.state, serving.state) == (Job.State.PENDING, Job.State.RUNNING)
