"""A small process supervisor for ``manage.py up``: it starts the product's processes, restarts
any that dies (after a backoff that doubles with each exit in a row), and stops them all on
request.

One process dying does not stop the others: the web server keeps answering while a worker comes
back, and the worker and beat reconnect to Redis after the embedded server is restarted.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from portal import embedded_redis

logger = logging.getLogger(__name__)

STOP_GRACE_S = 10.0


@dataclass
class RestartPolicy:
    """How long to wait before restarting a child that exited.

    The first restart waits ``base_s``; each further exit in a row doubles the wait, up to
    ``cap_s``. A child that ran for ``stable_s`` or longer before exiting was healthy: its next
    wait starts again from ``base_s``.
    """

    base_s: float = 0.5
    cap_s: float = 4.0
    stable_s: float = 30.0
    exits_in_a_row: int = 0

    def delay_after_exit(self, *, uptime_s: float) -> float:
        if uptime_s >= self.stable_s:
            self.exits_in_a_row = 0
        self.exits_in_a_row += 1
        return min(self.cap_s, self.base_s * 2 ** (self.exits_in_a_row - 1))


class Child:
    """A supervised process, started in its own session so that the terminal's Ctrl-C reaches
    only the supervisor, which then stops each child's whole process group in order."""

    def __init__(self, name: str, argv: Sequence[str], *, env: dict[str, str] | None = None) -> None:
        self.name = name
        self.argv = list(argv)
        self.env = env
        self.process: subprocess.Popen[bytes] | None = None
        self.started_at = 0.0

    def start(self) -> None:
        self.process = subprocess.Popen(self.argv, env=self.env, start_new_session=True)
        self.started_at = time.monotonic()

    def exit_code(self) -> int | None:
        """None while the child runs and is healthy; otherwise how it ended (a negative code is
        the signal that ended it). A child found ended has what is left of its group killed."""
        code = self.process.poll() if self.process is not None else None
        if code is not None:
            self._signal_group(signal.SIGKILL)
        return code

    def begin_stop(self) -> None:
        # SIGTERM to the child alone: a Celery worker then shuts down warmly, finishing the tasks
        # its pool processes run; whatever is left of the group is killed in finish_stop.
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()

    def finish_stop(self, *, deadline: float) -> None:
        if self.process is not None:
            try:
                self.process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                logger.warning("%s did not stop within %.0f s; killing it", self.name, STOP_GRACE_S)
        self._signal_group(signal.SIGKILL)
        if self.process is not None:
            self.process.wait()

    def _signal_group(self, sig: int) -> None:
        if self.process is None:
            return
        try:
            os.killpg(self.process.pid, sig)
        except ProcessLookupError:
            pass


class RedisChild(Child):
    """The embedded Redis server. Besides exiting, it counts as dead when it stops answering
    PING for ``ping_failures`` checks in a row; it is then killed and restarted like any child."""

    def __init__(self, socket_path: Path, *, ping_failures: int = 3) -> None:
        super().__init__("redis", embedded_redis.command(socket_path))
        self.socket_path = socket_path
        self.ping_failures = ping_failures
        self.failed_pings = 0

    def start(self) -> None:
        self.process = embedded_redis.start(self.socket_path)
        self.started_at = time.monotonic()
        self.failed_pings = 0

    def exit_code(self) -> int | None:
        code = super().exit_code()
        if code is not None:
            return code
        self.failed_pings = 0 if embedded_redis.answers(self.socket_path) else self.failed_pings + 1
        if self.failed_pings < self.ping_failures:
            return None
        logger.warning("redis did not answer PING %d times in a row; killing it", self.failed_pings)
        self._signal_group(signal.SIGKILL)
        assert self.process is not None
        return self.process.wait()

    def finish_stop(self, *, deadline: float) -> None:
        super().finish_stop(deadline=deadline)
        self.socket_path.unlink(missing_ok=True)


class Supervisor:
    """Runs ``children`` (started in order, stopped in reverse order) until ``should_stop``."""

    def __init__(self, children: Sequence[Child], *, poll_s: float = 0.25) -> None:
        self.children = list(children)
        self.poll_s = poll_s
        self.policies = {child.name: RestartPolicy() for child in self.children}
        self.restart_at: dict[str, float] = {}
        self.restarts = dict.fromkeys(self.policies, 0)

    def start(self) -> None:
        for child in self.children:
            child.start()
            logger.info("started %s (pid %d)", child.name, _pid(child))

    def run(self, should_stop: Callable[[], bool]) -> None:
        while not should_stop():
            self.check(now=time.monotonic())
            time.sleep(self.poll_s)

    def check(self, *, now: float) -> None:
        """One pass: restart the children whose wait is over, schedule the ones that ended."""
        for child in self.children:
            due = self.restart_at.get(child.name)
            if due is not None:
                if now >= due:
                    self._restart(child)
                continue
            code = child.exit_code()
            if code is not None:
                uptime_s = now - child.started_at
                delay_s = self._schedule_restart(child, uptime_s=uptime_s, now=now)
                logger.warning(
                    "%s (pid %d) exited with code %d%s after %.1f s; restarting it in %.1f s",
                    child.name,
                    _pid(child),
                    code,
                    _signal_name(code),
                    uptime_s,
                    delay_s,
                )

    def stop(self) -> None:
        running = [child for child in self.children if child.name not in self.restart_at]
        servers = [child for child in running if isinstance(child, RedisChild)]
        apps = [child for child in running if child not in servers]
        # Redis last, so that the worker and beat can finish talking to it.
        for group in (apps, servers):
            for child in reversed(group):
                child.begin_stop()
            deadline = time.monotonic() + STOP_GRACE_S
            for child in reversed(group):
                child.finish_stop(deadline=deadline)

    def _schedule_restart(self, child: Child, *, uptime_s: float, now: float) -> float:
        delay_s = self.policies[child.name].delay_after_exit(uptime_s=uptime_s)
        self.restart_at[child.name] = now + delay_s
        return delay_s

    def _restart(self, child: Child) -> None:
        del self.restart_at[child.name]
        try:
            child.start()
        except (OSError, RuntimeError) as error:
            delay_s = self._schedule_restart(child, uptime_s=0.0, now=time.monotonic())
            logger.error("%s could not be restarted (%s); trying again in %.1f s", child.name, error, delay_s)
            return
        self.restarts[child.name] += 1
        logger.warning("restarted %s (pid %d, restart %d)", child.name, _pid(child), self.restarts[child.name])


def _pid(child: Child) -> int:
    return child.process.pid if child.process is not None else 0


def _signal_name(code: int) -> str:
    if code >= 0:
        return ""
    try:
        return f" ({signal.Signals(-code).name})"
    except ValueError:
        return ""
