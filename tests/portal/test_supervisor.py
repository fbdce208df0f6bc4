"""The supervisor behind ``manage.py up``: its restart policy, and restarts and stops of real
processes (``sleep``, a shell with a child of its own, the embedded redis-server)."""

from __future__ import annotations

import logging
import os
import signal
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from portal import embedded_redis
from portal.supervisor import Child, RedisChild, RestartPolicy, Supervisor


@pytest.mark.parametrize(
    ("uptimes_s", "delays_s"),
    [
        pytest.param([1, 1, 1, 1, 1, 1], [0.5, 1, 2, 4, 4, 4], id="doubles-up-to-the-cap"),
        pytest.param([1, 1, 1, 60, 1], [0.5, 1, 2, 0.5, 1], id="a-long-run-starts-over"),
        pytest.param([30, 30], [0.5, 0.5], id="stable-from-stable_s-on"),
    ],
)
def test_the_restart_delay_doubles_with_each_exit_in_a_row_and_resets_after_a_stable_run(
    uptimes_s: list[float], delays_s: list[float]
) -> None:
    policy = RestartPolicy(base_s=0.5, cap_s=4.0, stable_s=30.0)
    assert [policy.delay_after_exit(uptime_s=u) for u in uptimes_s] == delays_s


def _run_until(supervisor: Supervisor, condition: object, *, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "the supervisor did not get there in time"
        supervisor.check(now=time.monotonic())
        time.sleep(0.05)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] == "Z")


@pytest.fixture
def sleeper() -> Iterator[Supervisor]:
    supervisor = Supervisor([Child("sleeper", ["sleep", "60"])])
    supervisor.start()
    yield supervisor
    supervisor.stop()


def test_a_killed_child_is_restarted_and_the_restart_is_logged(
    sleeper: Supervisor, caplog: pytest.LogCaptureFixture
) -> None:
    child = sleeper.children[0]
    assert child.process is not None
    first_pid = child.process.pid
    caplog.set_level(logging.INFO, logger="portal.supervisor")

    os.kill(first_pid, signal.SIGKILL)
    _run_until(sleeper, lambda: child.process.pid != first_pid, timeout_s=5)

    assert child.process.poll() is None
    assert f"sleeper (pid {first_pid}) exited with code -9 (SIGKILL) after" in caplog.text
    assert "restarting it in 0.5 s" in caplog.text
    assert f"restarted sleeper (pid {child.process.pid}, restart 1)" in caplog.text


def test_a_child_that_keeps_dying_waits_longer_each_time(sleeper: Supervisor) -> None:
    child = sleeper.children[0]
    waits = []
    for _ in range(3):
        assert child.process is not None
        pid = child.process.pid
        os.kill(pid, signal.SIGKILL)
        _run_until(sleeper, lambda: "sleeper" in sleeper.restart_at, timeout_s=5)
        waits.append(round(sleeper.restart_at["sleeper"] - time.monotonic(), 1))
        _run_until(sleeper, lambda pid=pid: child.process.pid != pid, timeout_s=10)
    assert waits[0] <= 0.5 < waits[1] <= 1.0 < waits[2] <= 2.0


def _all_gone(pids: list[int], *, timeout_s: float = 2) -> bool:
    """Whether every one of ``pids`` has ended (signals are delivered asynchronously)."""
    deadline = time.monotonic() + timeout_s
    while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.02)
    return not any(_alive(pid) for pid in pids)


def _children_of(pid: int, *, timeout_s: float = 5) -> list[int]:
    """The processes ``pid`` has started, once it has started some."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        children = [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
        if children:
            return children
        time.sleep(0.05)
    raise AssertionError(f"process {pid} started no child")


def test_stopping_ends_each_childs_whole_process_group() -> None:
    shell = Child("shell", ["sh", "-c", "sleep 60 & wait"])
    supervisor = Supervisor([shell])
    supervisor.start()
    assert shell.process is not None
    grandchildren = _children_of(shell.process.pid)

    supervisor.stop()

    assert shell.process.poll() is not None
    assert _all_gone(grandchildren)


def test_a_killed_child_leaves_nothing_of_its_group_behind() -> None:
    shell = Child("shell", ["sh", "-c", "sleep 60 & wait"])
    supervisor = Supervisor([shell])
    supervisor.start()
    assert shell.process is not None
    grandchildren = _children_of(shell.process.pid)

    os.kill(shell.process.pid, signal.SIGKILL)
    _run_until(supervisor, lambda: "shell" in supervisor.restart_at, timeout_s=5)

    assert _all_gone(grandchildren)
    supervisor.stop()


@pytest.fixture
def redis_socket() -> Iterator[Path]:
    # A short path: unix socket paths are limited to about 100 characters.
    directory = Path(tempfile.mkdtemp(prefix="fl-sup-"))
    yield directory / "redis.sock"
    for path in directory.iterdir():
        path.unlink()
    directory.rmdir()


def test_an_embedded_redis_that_stops_answering_is_killed_and_restarted(redis_socket: Path) -> None:
    redis_child = RedisChild(redis_socket, ping_failures=3)
    supervisor = Supervisor([redis_child])
    supervisor.start()
    try:
        assert redis_child.process is not None and embedded_redis.answers(redis_socket)
        hung_pid = redis_child.process.pid
        os.kill(hung_pid, signal.SIGSTOP)  # alive, but answers nothing

        started = time.monotonic()
        _run_until(supervisor, lambda: redis_child.process.pid != hung_pid, timeout_s=15)

        assert embedded_redis.answers(redis_socket)
        assert time.monotonic() - started < 10
        assert _all_gone([hung_pid])
    finally:
        supervisor.stop()
    assert not redis_socket.exists()
