"""The live cycle over the modelled fleet: snapshot, engine, guarded apply, ledger."""

from __future__ import annotations

import pytest
from django.db.models import Sum

from scheduling.models import Allocation, FleetClock, FleetSample, Job, Node, SchedulerEvent, UsageSample
from scheduling.services.pending import pending_info_for
from scheduling.services.snapshot import snapshot_build
from tests.scheduling.conftest import Fleet


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
    info = pending_info_for(job_ids=[waiting.pk])[waiting.pk]
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
    assert pending_info_for(job_ids=[second.pk])[second.pk].reason == "quota"


def test_a_stale_fencing_token_writes_nothing(fleet: Fleet) -> None:
    job = fleet.submit(gpus=8)
    fleet.token += 5
    fleet.tick()
    job.refresh_from_db()
    assert job.state == Job.State.RUNNING
    clock = FleetClock.objects.get()

    from datetime import timedelta

    from scheduling.services.cycle import cycle_tick
    from tests.scheduling.conftest import T0

    assert cycle_tick(token=1, wall_now=T0 + timedelta(seconds=99)) is None
    assert FleetClock.objects.get().ticks == clock.ticks


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
    with django_assert_num_queries(7):  # type: ignore[operator]
        snapshot_build(sim_now_s=0.0)
    for _ in range(20):
        fleet.submit(gpus=8)
    fleet.tick()
    with django_assert_num_queries(7):  # type: ignore[operator]
        loaded = snapshot_build(sim_now_s=0.0)
    assert len(loaded.jobs) == 21


def test_serving_growth_preempts_training_which_yields_after_its_grace_period(fleet: Fleet) -> None:
    training = fleet.submit(gpus=32, duration_s=36000.0, checkpoint_interval_s=600.0, name="pretrain")
    fleet.tick()
    training.refresh_from_db()
    assert training.state == Job.State.RUNNING

    serving = fleet.submit(gpus=8, kind="serving", priority_class_id=fleet.serving.pk, name="api")
    fleet.tick()
    training.refresh_from_db()
    assert training.state == Job.State.RUNNING
    assert training.grace_until_s is not None

    fleet.tick()  # the 60 s grace period ends
    fleet.tick()
    training.refresh_from_db()
    serving.refresh_from_db()
    assert serving.state == Job.State.RUNNING
    assert training.restarts == 1
    assert SchedulerEvent.objects.filter(job=training, kind=SchedulerEvent.Kind.EVICTED).exists()
