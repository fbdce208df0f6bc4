"""One cycle leader at a time: a Redis lock with a short expiry, and a fencing token.

The lock's expiry is short (``FLEET_CYCLE_LOCK_TIMEOUT_S``, a few cycle intervals) and the leader
renews it while its tick runs, so a living leader keeps it however long its tick takes while a
dead one's lapses within seconds and the next leader ticks. A leader that stalls past its lock
can no longer write: the fleet clock's guarded update refuses a token that is not newer than
the newest one that ticked (``FleetClock.leader_token``).

The token counter lives in Redis, which may keep nothing on disk, while the database keeps the
newest token that ticked. Each token is issued by one atomic script that raises the counter
above the database's token when it is behind, so after Redis restarts the next leader's token is
newer again instead of being refused until the counter catches up.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import redis
from django.conf import settings
from django.utils import timezone
from redis.exceptions import LockError, RedisError
from redis.lock import Lock

from scheduling.cycle.tick import TickResult, cycle_tick
from scheduling.live.cycle_timings import cycle_timings_record
from scheduling.models import FleetClock

logger = logging.getLogger("fleetline.cycle")

LOCK_KEY = "fleetline:cycle:leader"
TOKEN_KEY = "fleetline:cycle:token"
# The worker that ran the last tick, to log when leadership moves to another worker.
LAST_LEADER_KEY = "fleetline:cycle:last-leader"

# KEYS[1] the counter; ARGV[1] the database's newest token, ARGV[2] that plus one. Returns the new
# token and 1 when the counter had to be raised (it was behind: Redis lost it), else 0.
_TOKEN_ISSUE_LUA = """
local token = redis.call('INCR', KEYS[1])
if token <= tonumber(ARGV[1]) then
  redis.call('SET', KEYS[1], ARGV[2])
  return {ARGV[2], 1}
end
return {token, 0}
"""


def cycle_run_as_leader(*, worker: str | None = None) -> TickResult | None:
    """Run one tick if no other worker is running one; otherwise return None quietly.
    ``worker`` names the caller in the logs (a Celery worker's node name); by default the host
    and process."""
    worker = worker or f"{socket.gethostname()}:{os.getpid()}"
    client = redis.Redis.from_url(settings.REDIS_URL)
    lock_timeout_s = settings.FLEET_CYCLE_LOCK_TIMEOUT_S
    # Not thread-local: the renewal thread extends the lock this thread took.
    lock = client.lock(LOCK_KEY, timeout=lock_timeout_s, blocking=False, thread_local=False)
    started = time.perf_counter()
    if not lock.acquire():
        logger.debug("tick skipped by %s: another worker holds the cycle lock", worker)
        return None
    try:
        with _lock_renewed(lock, every_s=lock_timeout_s / 3):
            token = token_issue(client=client)
            lead_ms = (time.perf_counter() - started) * 1000.0
            result = cycle_tick(token=token, wall_now=timezone.now())
    finally:
        try:
            lock.release()
        except LockError:
            # The lock expired while this tick ran; the fencing token already kept it safe.
            pass
    if result is not None:
        _leader_note(client=client, worker=worker, token=token)
        _tick_log(result=result, worker=worker, lead_ms=lead_ms)
        cycle_timings_record(
            client=client,
            timings_ms={"lock": lead_ms, **result.timings_ms, "total": lead_ms + sum(result.timings_ms.values())},
        )
    return result


def token_issue(*, client: redis.Redis) -> int:
    """A fencing token newer than every token issued before by this Redis and than the newest
    token that ticked in the database."""
    newest = FleetClock.objects.filter(pk=1).values_list("leader_token", flat=True).first() or 0
    token, raised = client.eval(_TOKEN_ISSUE_LUA, 1, TOKEN_KEY, newest, newest + 1)
    if raised:
        logger.warning("fencing token counter was behind the database (Redis lost it): raised to %d", int(token))
    return int(token)


@contextmanager
def _lock_renewed(lock: Lock, *, every_s: float) -> Iterator[None]:
    """Keep resetting the lock's expiry while the block runs, so a short expiry lapses only
    under a dead leader, never under a living one in a long tick."""
    done = threading.Event()

    def renew() -> None:
        while not done.wait(every_s):
            try:
                lock.reacquire()
            except (LockError, RedisError):
                logger.warning("cycle lock lost during a tick; its fencing token still guards its writes")
                return

    renewer = threading.Thread(target=renew, name="cycle-lock-renewal", daemon=True)
    renewer.start()
    try:
        yield
    finally:
        done.set()
        renewer.join()


def _leader_note(*, client: redis.Redis, worker: str, token: int) -> None:
    """Log when this tick's worker is not the one that ran the previous tick."""
    previous = client.getset(LAST_LEADER_KEY, worker)
    previous_name = previous.decode() if isinstance(previous, bytes) else previous
    if previous_name != worker:
        logger.info("cycle leader is now %s (token %d), was %s", worker, token, previous_name or "unknown")


def _tick_log(*, result: TickResult, worker: str, lead_ms: float) -> None:
    timings = " ".join(f"{name}={ms:.1f}ms" for name, ms in result.timings_ms.items())
    total_ms = lead_ms + sum(result.timings_ms.values())
    behind = f", {result.wall_behind_s:.1f} s of wall time to catch up" if result.wall_behind_s else ""
    logger.info(
        "tick %d token %d by %s: fleet time %.1f -> %.1f s, %d changes%s; lock+token=%.1fms %s total=%.1fms",
        result.tick,
        result.token,
        worker,
        result.sim_from_s,
        result.sim_to_s,
        len(result.applied.changes),
        behind,
        lead_ms,
        timings,
        total_ms,
    )
