"""The cycle on real parts: a Celery worker over Redis, concurrent leaders, a killed worker,
and the websocket feed."""

from __future__ import annotations

import asyncio
import logging
import select
import signal
import subprocess
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest
import redis
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import connection
from django.db.models import Sum
from django.test import override_settings
from django.utils import timezone

from core.groups import FLEET_GROUP
from scheduling.cycle.leader import LOCK_KEY, TOKEN_KEY, cycle_run_as_leader
from scheduling.cycle.tick import cycle_tick
from scheduling.models import Allocation, FleetClock, FleetSample, Job, Node
from scheduling.tasks import fleet_cycle
from tests.scheduling.conftest import T0, Fleet, build_fleet

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def live_fleet(transactional_db: None) -> Fleet:
    redis.Redis.from_url(settings.REDIS_URL).delete(LOCK_KEY)
    return build_fleet()


def _booked_consistently() -> None:
    """Every node's counter equals its allocations and stays within its GPUs."""
    for node in Node.objects.all():
        held = Allocation.objects.filter(node=node).aggregate(total=Sum("gpus"))["total"] or 0
        assert node.allocated_gpus == held
        assert held <= node.gpus


def test_a_real_worker_runs_the_cycle_and_starts_jobs(
    live_fleet: Fleet, celery_worker_process: subprocess.Popen[bytes]
) -> None:
    job = live_fleet.submit(gpus=16)

    result = fleet_cycle.delay().get(timeout=30)

    assert result is not None
    job.refresh_from_db()
    assert job.state == Job.State.RUNNING
    _booked_consistently()


def test_a_tick_that_finds_the_lock_held_exits_quietly(live_fleet: Fleet) -> None:
    client = redis.Redis.from_url(settings.REDIS_URL)
    client.set(LOCK_KEY, "someone-else", px=5000)
    try:
        assert cycle_run_as_leader() is None
    finally:
        client.delete(LOCK_KEY)


def test_two_leaders_ticking_at_once_never_double_book_a_gpu(
    live_fleet: Fleet, caplog: pytest.LogCaptureFixture
) -> None:
    for i in range(12):
        live_fleet.submit(gpus=8 if i % 3 else 16, duration_s=120.0 + 30 * i)
    barrier = threading.Barrier(2)
    wins: list[int] = []

    def leader(first_token: int) -> None:
        try:
            for step in range(8):
                barrier.wait(timeout=30)
                wall = T0 + timedelta(seconds=live_fleet.wall_s + 1 + step)
                if cycle_tick(token=first_token + 2 * step, wall_now=wall, speed=60.0) is not None:
                    wins.append(step)
        finally:
            connection.close()

    threads = [threading.Thread(target=leader, args=(token,)) for token in (100, 101)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)

    # A claim commits before its leader plans, so the other leader may claim the next tick at the
    # same wall time: each step one or both leaders write a tick, in turn; every other attempt is
    # refused at its claim, or fenced out before writing its plan, and says so at WARNING.
    assert set(wins) == set(range(8))
    lost = [
        record
        for record in caplog.records
        if "stale tick refused" in record.getMessage() or "fenced out" in record.getMessage()
    ]
    assert len(wins) + len(lost) == 16 and {record.levelno for record in lost} == {logging.WARNING}
    _booked_consistently()
    assert Job.objects.filter(state=Job.State.RUNNING).exists()


def test_a_worker_killed_mid_tick_leaves_no_half_applied_gang(
    live_fleet: Fleet, subprocess_env: dict[str, str]
) -> None:
    gang = live_fleet.submit(gpus=32, name="gang")
    clock = FleetClock.objects.get()
    clock_before, sim_before = clock.ticks, clock.sim_now_s
    redis.Redis.from_url(settings.REDIS_URL).set(TOKEN_KEY, live_fleet.token + 10)

    child = subprocess.run(
        [sys.executable, "-m", "tests.scheduling.kill_mid_tick"],
        cwd=ROOT,
        env={**subprocess_env, "FLEET_CYCLE_LOCK_TIMEOUT_S": "1"},
        timeout=60,
    )

    assert child.returncode == 9
    gang.refresh_from_db()
    assert gang.state == Job.State.PENDING
    assert not Allocation.objects.exists()
    # Its claim of the tick committed before it planned; its plan never did, and no later leader
    # writes under its token. Fleet time moves only with a written plan.
    assert FleetClock.objects.get().ticks == clock_before + 1
    assert FleetClock.objects.get().sim_now_s == sim_before
    _booked_consistently()

    time.sleep(1.2)  # the dead leader's lock expires
    with override_settings(FLEET_CYCLE_LOCK_TIMEOUT_S=5):
        assert cycle_run_as_leader() is not None
    gang.refresh_from_db()
    assert gang.state == Job.State.RUNNING
    assert Allocation.objects.filter(job=gang).aggregate(total=Sum("gpus"))["total"] == 32
    _booked_consistently()
    # The next tick's ledger covers the dead tick's interval too: no fleet time goes unrecorded.
    recorded = FleetSample.objects.filter(sim_time_s__gt=sim_before).aggregate(total=Sum("interval_s"))["total"] or 0.0
    assert recorded == pytest.approx(FleetClock.objects.get().sim_now_s - sim_before)


# A new leader ticks at most this long after the old one is killed mid-tick: the lock's expiry
# (3 s by default) plus a second for the queued tasks and the tick itself.
TAKEOVER_BOUND_S = settings.FLEET_CYCLE_LOCK_TIMEOUT_S + 2.0


def _wait_for_line(process: subprocess.Popen[bytes], expected: bytes, timeout_s: float) -> None:
    assert process.stdout is not None
    ready, _, _ = select.select([process.stdout], [], [], timeout_s)
    assert ready, f"the child did not print {expected!r} within {timeout_s} s"
    assert process.stdout.readline().strip() == expected


def test_after_a_leader_is_killed_mid_tick_a_worker_ticks_within_seconds_and_the_clock_loses_nothing(
    live_fleet: Fleet, subprocess_env: dict[str, str], celery_worker_process: subprocess.Popen[bytes]
) -> None:
    FleetClock.objects.filter(pk=1).update(wall_updated_at=timezone.now())  # ticking on the real clock
    before = FleetClock.objects.get()
    gang = live_fleet.submit(gpus=32, name="gang")
    client = redis.Redis.from_url(settings.REDIS_URL)

    doomed = subprocess.Popen(
        [sys.executable, "-m", "tests.scheduling.kill_mid_tick", "--stall"],
        cwd=ROOT,
        env=subprocess_env,
        stdout=subprocess.PIPE,
    )
    try:
        _wait_for_line(doomed, b"mid-tick", timeout_s=60)
        # Stalled well past the lock's expiry, the living leader still holds its lock.
        time.sleep(settings.FLEET_CYCLE_LOCK_TIMEOUT_S * 1.5)
        assert client.get(LOCK_KEY) is not None
        assert fleet_cycle.delay().get(timeout=30) is None
    finally:
        doomed.send_signal(signal.SIGKILL)
        doomed.wait(timeout=10)
    killed_at, killed_wall = time.monotonic(), timezone.now()

    result = None
    while result is None and time.monotonic() - killed_at < 30:
        result = fleet_cycle.delay().get(timeout=30)
        if result is None:
            time.sleep(0.1)
    takeover_s = time.monotonic() - killed_at

    assert doomed.returncode == -signal.SIGKILL
    assert result is not None
    assert takeover_s < TAKEOVER_BOUND_S <= 5.0
    gang.refresh_from_db()
    assert gang.state == Job.State.RUNNING
    _booked_consistently()
    # The stall is longer than one tick may cover; the ticks after it catch up the rest, a
    # bounded step each (how many depends on how long the stall lasted on a loaded machine).
    for _ in range(30):
        after = FleetClock.objects.get()
        if after.wall_updated_at >= killed_wall:
            break
        assert fleet_cycle.delay().get(timeout=30) is not None
    assert after.wall_updated_at >= killed_wall
    accounted_s = (after.wall_updated_at - before.wall_updated_at).total_seconds()
    assert after.sim_now_s == pytest.approx(before.sim_now_s + accounted_s * settings.FLEET_CLOCK_SPEED)


async def test_a_tick_pushes_the_fleet_share_to_the_fleet_group(live_fleet: Fleet) -> None:
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add(FLEET_GROUP, channel)
    await database_sync_to_async(live_fleet.submit)(gpus=8)

    await database_sync_to_async(live_fleet.tick)()

    message = await asyncio.wait_for(layer.receive(channel), 10)
    while message["payload"]["kind"] != "fleet":
        message = await asyncio.wait_for(layer.receive(channel), 10)
    payload = message["payload"]
    assert payload["training_gpus"] == 8
    assert payload["capacity_gpus"] == 32
    assert sum(payload["node_used"].values()) == 8
    await layer.group_discard(FLEET_GROUP, channel)


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the idle-in-transaction timeout is PostgreSQL's")
def test_a_leader_frozen_mid_tick_loses_its_transaction_and_a_worker_ticks_without_it(
    live_fleet: Fleet, subprocess_env: dict[str, str], celery_worker_process: subprocess.Popen[bytes]
) -> None:
    gang = live_fleet.submit(gpus=32, name="gang")
    frozen = subprocess.Popen(
        [sys.executable, "-m", "tests.scheduling.kill_mid_tick", "--stall"],
        cwd=ROOT,
        env={**subprocess_env, "FLEET_CYCLE_IDLE_TIMEOUT_S": "3"},
        stdout=subprocess.PIPE,
    )
    try:
        _wait_for_line(frozen, b"mid-tick", timeout_s=60)
        # Stopped, it can neither renew its lock nor finish its transaction.
        frozen.send_signal(signal.SIGSTOP)
        frozen_at = time.monotonic()
        result = None
        while result is None and time.monotonic() - frozen_at < 60:
            result = fleet_cycle.delay().get(timeout=60)
            if result is None:
                time.sleep(0.1)
        takeover_s = time.monotonic() - frozen_at
    finally:
        frozen.send_signal(signal.SIGKILL)
        frozen.wait(timeout=10)

    assert result is not None
    # The lock lapses, then PostgreSQL ends the frozen session once it has idled past the timeout.
    assert takeover_s < settings.FLEET_CYCLE_LOCK_TIMEOUT_S + 3.0 + 10.0
    gang.refresh_from_db()
    assert gang.state == Job.State.RUNNING
    _booked_consistently()
