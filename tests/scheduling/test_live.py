"""The cycle on real parts: a Celery worker over Redis, concurrent leaders, a killed worker,
and the websocket feed."""

from __future__ import annotations

import asyncio
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

from portal.groups import FLEET_GROUP
from scheduling.models import Allocation, FleetClock, Job, Node
from scheduling.services.cycle import cycle_tick
from scheduling.services.leader import LOCK_KEY, TOKEN_KEY, cycle_run_as_leader
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


def test_two_leaders_ticking_at_once_never_double_book_a_gpu(live_fleet: Fleet) -> None:
    for i in range(12):
        live_fleet.submit(gpus=8 if i % 3 else 16, duration_s=120.0 + 30 * i)
    barrier = threading.Barrier(2)
    wins: list[int] = []

    def leader(first_token: int) -> None:
        try:
            for step in range(8):
                barrier.wait(timeout=30)
                wall = T0 + timedelta(seconds=100 + step)
                if cycle_tick(token=first_token + 2 * step, wall_now=wall, speed=60.0) is not None:
                    wins.append(step)
        finally:
            connection.close()

    threads = [threading.Thread(target=leader, args=(token,)) for token in (100, 101)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)

    assert len(wins) == 8  # exactly one of the two leaders wrote each step
    _booked_consistently()
    assert Job.objects.filter(state=Job.State.RUNNING).exists()


def test_a_worker_killed_mid_tick_leaves_no_half_applied_gang(
    live_fleet: Fleet, subprocess_env: dict[str, str]
) -> None:
    gang = live_fleet.submit(gpus=32, name="gang")
    clock_before = FleetClock.objects.get().ticks
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
    assert FleetClock.objects.get().ticks == clock_before
    _booked_consistently()

    time.sleep(1.2)  # the dead leader's lock expires
    with override_settings(FLEET_CYCLE_LOCK_TIMEOUT_S=5):
        assert cycle_run_as_leader() is not None
    gang.refresh_from_db()
    assert gang.state == Job.State.RUNNING
    assert Allocation.objects.filter(job=gang).aggregate(total=Sum("gpus"))["total"] == 32
    _booked_consistently()


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
