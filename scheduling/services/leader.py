"""One cycle leader at a time: a Redis lock with an expiry (a crashed leader's lock lapses) and
a fencing token, so a leader that stalls past its lock can no longer write (the fleet clock's
guarded update refuses a token older than the newest one seen)."""

from __future__ import annotations

import redis
from django.conf import settings
from django.utils import timezone
from redis.exceptions import LockError

from scheduling.services.cycle import TickResult, cycle_tick

LOCK_KEY = "fleetline:cycle:leader"
TOKEN_KEY = "fleetline:cycle:token"


def cycle_run_as_leader() -> TickResult | None:
    """Run one tick if no other worker is running one; otherwise return None quietly."""
    client = redis.Redis.from_url(settings.REDIS_URL)
    lock = client.lock(LOCK_KEY, timeout=settings.FLEET_CYCLE_LOCK_TIMEOUT_S, blocking=False)
    if not lock.acquire():
        return None
    try:
        token = int(client.incr(TOKEN_KEY))
        return cycle_tick(token=token, wall_now=timezone.now())
    finally:
        try:
            lock.release()
        except LockError:
            # The lock expired while this tick ran; the fencing token already kept it safe.
            pass
