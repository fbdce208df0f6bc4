"""Faults on the production layout, one after another on the same running fleet: a worker killed
in the middle of a tick, Redis restarted, PostgreSQL restarted, the leader killed again and again.
Jobs are submitted through the API all along.

After each fault scheduling must resume within a stated bound (the fleet clock's ticks advance;
the seconds are printed in the run's summary and kept in var/reliability/recovery.json), and the
fleet must be sound: no GPU double-booked, every running gang whole, no job lost or made twice,
no allocation left to a job that is not running. The tests run in the order written: each one
leaves the layout whole again for the next."""

from __future__ import annotations

import time

import pytest

from tests.reliability.conftest import CLOCK_SPEED, Layout, Submitter, wait_for
from tests.reliability.fleet_checks import fleet_violations

pytestmark = pytest.mark.reliability

# How soon scheduling must tick again after each fault. A dead leader's lock lapses within
# FLEET_CYCLE_LOCK_TIMEOUT_S (3 s) and beat queues a tick every 0.5 s; after a restart, Celery
# reconnects to Redis in its first retries and Django opens a new database connection per task.
# The bounds leave room for a busy two-core machine.
WORKER_KILL_BOUND_S = 15.0
REDIS_RESTART_BOUND_S = 30.0
POSTGRES_RESTART_BOUND_S = 30.0
LEADER_KILL_BOUND_S = 15.0
LEADER_KILLS = 3
DOWN_S = 1.0  # how long Redis and PostgreSQL stay down before they start again
# The clock is caught up when it owes at most this much wall time (a cycle interval, a tick, and
# the time beat takes to queue the next one, on a busy machine).
CAUGHT_UP_WITHIN_S = 2.0


def assert_fleet_sound(layout: Layout, submitter: Submitter) -> None:
    acknowledged = dict(submitter.acknowledged)
    with layout.connect() as connection:
        problems = fleet_violations(
            connection,
            submitter_id=int(layout.api["user_id"]),
            acknowledged=acknowledged,
            tried=lambda: set(submitter.tried),
        )
    assert problems == [], "\n".join(problems)


def wait_workers_ready(layout: Layout) -> None:
    for worker in layout.workers:
        wait_for(lambda worker=worker: layout.worker_ready(worker), timeout_s=90, what=f"{worker.name} answering")


def test_the_layout_places_work_submitted_through_the_api_and_completes_it(
    layout: Layout, submitter: Submitter
) -> None:
    def placed_and_completed() -> bool:
        with layout.connect() as connection:
            states = dict(
                connection.execute(
                    "SELECT state, count(*) FROM scheduling_job WHERE submitted_by_id = %s GROUP BY state",
                    [layout.api["user_id"]],
                ).fetchall()
            )
        return states.get("running", 0) > 0 and states.get("completed", 0) > 0

    wait_for(placed_and_completed, timeout_s=60, what="submitted jobs running and completing")
    assert_fleet_sound(layout, submitter)


def test_a_worker_killed_mid_tick_is_replaced_as_leader_within_the_bound_and_the_clock_loses_no_time(
    layout: Layout, submitter: Submitter
) -> None:
    worker = layout.tick_holder(timeout_s=30)
    worker.kill()  # frozen inside its tick's transaction, holding the cycle lock: now dead there
    killed_at = time.monotonic()
    before = layout.clock().ticks  # the killed tick never commits

    recovered_s = layout.wait_for_ticks(after=before, count=1, since=killed_at, bound_s=WORKER_KILL_BOUND_S)
    caught_up_s = layout.wait_caught_up(within_s=CAUGHT_UP_WITHIN_S, since=killed_at)

    layout.note("worker killed mid-tick", recovered_s=recovered_s, caught_up_s=caught_up_s, bound_s=WORKER_KILL_BOUND_S)
    assert_fleet_sound(layout, submitter)
    worker.start()  # as its supervisor would
    wait_workers_ready(layout)


def test_scheduling_resumes_within_the_bound_after_redis_restarts_empty(layout: Layout, submitter: Submitter) -> None:
    layout.redis.kill()  # the lock, the token counter and the queues are gone
    killed_at = time.monotonic()
    # A tick already past its lock may still commit without Redis: count two ticks to be sure
    # that one began after the restart.
    before = layout.clock().ticks
    time.sleep(DOWN_S)
    layout.redis.start()

    recovered_s = layout.wait_for_ticks(after=before, count=2, since=killed_at, bound_s=REDIS_RESTART_BOUND_S)
    caught_up_s = layout.wait_caught_up(within_s=CAUGHT_UP_WITHIN_S, since=killed_at)

    layout.note(
        "redis restarted",
        down_s=DOWN_S,
        recovered_s=recovered_s,
        caught_up_s=caught_up_s,
        bound_s=REDIS_RESTART_BOUND_S,
    )
    assert_fleet_sound(layout, submitter)
    assert [child.name for child in layout.children.values() if not child.alive] == []


def test_scheduling_resumes_within_the_bound_after_postgresql_restarts(layout: Layout, submitter: Submitter) -> None:
    if not layout.postgres.restartable:
        pytest.skip(
            "PostgreSQL restart skipped: no PostgreSQL server binaries to run a private cluster, "
            "and the shared server is never restarted"
        )
    before = layout.clock().ticks
    layout.postgres.stop(mode="immediate")  # as a crash: open transactions are lost
    stopped_at = time.monotonic()
    time.sleep(DOWN_S)
    layout.postgres.start()

    recovered_s = layout.wait_for_ticks(after=before, count=1, since=stopped_at, bound_s=POSTGRES_RESTART_BOUND_S)
    caught_up_s = layout.wait_caught_up(within_s=CAUGHT_UP_WITHIN_S, since=stopped_at)

    layout.note(
        "postgresql restarted",
        down_s=DOWN_S,
        recovered_s=recovered_s,
        caught_up_s=caught_up_s,
        bound_s=POSTGRES_RESTART_BOUND_S,
    )
    assert_fleet_sound(layout, submitter)
    assert [child.name for child in layout.children.values() if not child.alive] == []


def test_killing_the_leader_again_and_again_hands_the_cycle_on_within_the_bound_each_time(
    layout: Layout, submitter: Submitter
) -> None:
    for _ in range(LEADER_KILLS):
        leader = layout.tick_holder(timeout_s=30)
        leader.kill()
        killed_at = time.monotonic()
        before = layout.clock().ticks
        leader.start()  # as its supervisor would: the other worker leads meanwhile

        recovered_s = layout.wait_for_ticks(after=before, count=1, since=killed_at, bound_s=LEADER_KILL_BOUND_S)
        layout.note("leader killed", worker=leader.name, recovered_s=recovered_s, bound_s=LEADER_KILL_BOUND_S)
        assert_fleet_sound(layout, submitter)
        wait_workers_ready(layout)


def test_after_every_fault_no_job_was_lost_or_made_twice_and_the_fleet_clock_lost_no_time(
    layout: Layout, submitter: Submitter
) -> None:
    submitter.stop()
    layout.wait_caught_up(within_s=CAUGHT_UP_WITHIN_S, since=time.monotonic())
    clock = layout.clock()
    wall_s = time.time()

    assert_fleet_sound(layout, submitter)
    assert submitter.errors == []
    assert len(submitter.acknowledged) == len(submitter.tried)
    with layout.connect() as connection:
        (completed,) = connection.execute(
            "SELECT count(*) FROM scheduling_job WHERE submitted_by_id = %s AND state = 'completed'",
            [layout.api["user_id"]],
        ).fetchone()
    assert completed > 0
    # Fleet time kept pace with wall time through every outage: what the clock still owes is all
    # that is missing.
    start = layout.clock_at_start
    assert start is not None
    wall_elapsed_s = wall_s - layout.wall_at_start_s
    lost_s = wall_elapsed_s - (clock.sim_now_s - start.sim_now_s) / CLOCK_SPEED - clock.behind_s + start.behind_s
    layout.note(
        "whole run",
        wall_s=wall_elapsed_s,
        ticks=clock.ticks - start.ticks,
        jobs_submitted=len(submitter.acknowledged),
        jobs_completed=completed,
        submit_retries=submitter.failed_attempts,
        replayed_submissions=submitter.replayed,
        fleet_clock_lost_s=lost_s,
    )
    assert abs(lost_s) < 1.0
