"""``manage.py up`` as ``make run`` starts it, with real processes: the embedded Redis, daphne, a
Celery worker and beat on the test database. A killed child is restarted while the others keep
serving; SIGTERM stops them all. The tests in this module run in order on one supervisor."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from celery import Celery
from django.core.management import call_command
from pytest_django import DjangoDbBlocker

from core.redis_urls import celery_url
from portal import embedded_redis

ROOT = Path(__file__).resolve().parents[2]
STARTUP_S = 90
WORKER_BACK_S = 60
REDIS_BACK_S = 5


@dataclass
class Up:
    process: subprocess.Popen[bytes]
    url: str
    log: Path
    redis_socket: Path

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def children(self) -> dict[str, int]:
        """The supervisor's children by name (redis, web, worker, beat) from /proc."""
        names = {"redis-server": "redis", "daphne": "web", " worker ": "worker", " beat ": "beat"}
        found = {}
        for pid in Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children").read_text().split():
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            for marker, name in names.items():
                if marker in cmdline:
                    found[name] = int(pid)
        return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return error.code
    except OSError:
        return 0


def _eventually(condition: Callable[[], bool], *, timeout_s: float, what: str) -> float:
    """Wait until ``condition`` holds; return how long it took."""
    started = time.monotonic()
    while not condition():
        if time.monotonic() - started > timeout_s:
            raise AssertionError(f"{what}: not within {timeout_s} s")
        time.sleep(0.1)
    return time.monotonic() - started


def _worker_answers(redis_socket: Path) -> bool:
    # Not the current app: tasks queued later in this process must keep the test broker.
    app = Celery(broker=celery_url(f"unix://{redis_socket}"), set_as_current=False)
    try:
        return bool(app.control.ping(timeout=1.0))
    except Exception:  # the broker may be down for a moment: not answering yet
        return False
    finally:
        app.close()


@pytest.fixture(scope="module")
def up(test_database_url: str, django_db_blocker: DjangoDbBlocker) -> Iterator[Up]:
    var_dir = Path(tempfile.mkdtemp(prefix="fl-up-"))  # short: unix socket paths are limited
    redis_socket = var_dir / "redis" / "redis.sock"
    port = _free_port()
    env = {key: value for key, value in os.environ.items() if key not in {"REDIS_URL", "FLEETLINE_DEMO"}}
    env.update(
        DATABASE_URL=test_database_url,
        FLEETLINE_VAR_DIR=str(var_dir),
        FLEETLINE_REDIS_SOCKET=str(redis_socket),
        LOG_LEVEL="INFO",
        PYTHONUNBUFFERED="1",
    )
    log = var_dir / "up.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [sys.executable, "manage.py", "up", "--port", str(port)],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    running = Up(process, f"http://127.0.0.1:{port}", log, redis_socket)
    try:
        _eventually(
            lambda: process.poll() is not None or _status(f"{running.url}/login/") == 200,
            timeout_s=STARTUP_S,
            what="the web server answering",
        )
        assert process.poll() is None, running.log_text()
        yield running
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
        # The cycle wrote to the test database; leave it empty for the tests after these.
        with django_db_blocker.unblock():
            call_command("flush", interactive=False, verbosity=0)
        shutil.rmtree(var_dir, ignore_errors=True)


def test_up_runs_redis_web_worker_and_beat_without_demo_data_by_default(
    up: Up, django_db_blocker: DjangoDbBlocker
) -> None:
    assert set(up.children()) == {"redis", "web", "worker", "beat"}
    assert "Fleetline is running on http://127.0.0.1:" in up.log_text()
    assert "Demo logins" not in up.log_text()
    assert "No users yet" in up.log_text()
    from django.contrib.auth.models import User

    with django_db_blocker.unblock():
        assert not User.objects.exists()


def test_a_killed_worker_is_restarted_while_the_web_server_keeps_answering(up: Up) -> None:
    _eventually(lambda: _worker_answers(up.redis_socket), timeout_s=WORKER_BACK_S, what="the first worker")
    old_worker = up.children()["worker"]

    os.kill(old_worker, signal.SIGKILL)

    assert _status(f"{up.url}/login/") == 200
    _eventually(lambda: up.children().get("worker", old_worker) != old_worker, timeout_s=10, what="a new worker")
    assert _status(f"{up.url}/login/") == 200
    _eventually(lambda: _worker_answers(up.redis_socket), timeout_s=WORKER_BACK_S, what="the new worker answering")
    restarted = f"restarted worker (pid {up.children()['worker']}, restart 1)"
    # The supervisor's log line may reach the file a moment after the new worker answers.
    _eventually(lambda: restarted in up.log_text(), timeout_s=5, what="the restart in the log")
    assert f"worker (pid {old_worker}) exited with code -9 (SIGKILL)" in up.log_text()
    assert up.process.poll() is None


def test_a_killed_embedded_redis_is_back_and_answering_within_seconds(up: Up) -> None:
    old_redis = up.children()["redis"]

    os.kill(old_redis, signal.SIGKILL)

    took_s = _eventually(
        lambda: embedded_redis.answers(up.redis_socket) and up.children().get("redis") not in (None, old_redis),
        timeout_s=REDIS_BACK_S,
        what="the embedded Redis answering again",
    )
    assert took_s < REDIS_BACK_S
    assert f"redis (pid {old_redis}) exited with code -9 (SIGKILL)" in up.log_text()
    assert _status(f"{up.url}/login/") == 200
    # The worker reconnects to the new server on its own.
    _eventually(lambda: _worker_answers(up.redis_socket), timeout_s=WORKER_BACK_S, what="the worker reconnecting")


def test_sigterm_stops_every_child_and_the_embedded_redis(up: Up) -> None:
    children = up.children()
    assert set(children) == {"redis", "web", "worker", "beat"}

    up.process.send_signal(signal.SIGTERM)

    assert up.process.wait(timeout=30) == 0
    for name, pid in children.items():
        assert not Path(f"/proc/{pid}").exists(), f"{name} still running"
    assert not up.redis_socket.exists()
    assert "Fleetline stopped." in up.log_text()
