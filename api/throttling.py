"""Request budgets per user, counted in the shared Redis (the ``throttle`` cache, Django's
``RedisCache``), so that every web process enforces one budget. Rates come from settings when a
request is counted, not when the module is imported, so that a deployment (or a test) may change
them.

The rule: at most N requests per user and scope in each fixed window of the rate's period
("6000/min": windows of one minute), counted with one INCR (and EXPIRE) per request. DRF's own
throttles keep every request's time in a list that each request reads and rewrites whole, so
their cost grows with the budget; this counter costs the same at 6,000 a minute as at 6."""

from __future__ import annotations

import time
from typing import Any

from django.conf import settings
from django.core.cache import caches
from rest_framework.request import Request
from rest_framework.throttling import BaseThrottle

from core.redis_pools import client_on

PERIOD_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def rate_parse(rate: str) -> tuple[int, int]:
    """ "6000/min" -> (6000, 60): requests allowed and the window in seconds."""
    count, _, period = rate.partition("/")
    return int(count), PERIOD_S[period.strip()[0]]


class ApiUserThrottle(BaseThrottle):
    scope = "api"
    setting = "API_THROTTLE_RATE"

    def __init__(self) -> None:
        self.wait_s: float | None = None

    def window_key(self, *, user_id: Any, now: float) -> tuple[str, int]:
        """The cache key counting ``user_id``'s requests in the window holding ``now``, and the
        window's length."""
        _, period_s = rate_parse(str(getattr(settings, self.setting)))
        return f"{self.scope}:{user_id}:{int(now // period_s)}", period_s

    def allow_request(self, request: Request, view: Any) -> bool:
        if not request.user or not request.user.is_authenticated:
            return True  # authentication refuses these first
        limit, _ = rate_parse(str(getattr(settings, self.setting)))
        now = time.time()
        key, period_s = self.window_key(user_id=request.user.pk, now=now)
        cache = caches["throttle"]
        full_key = cache.make_and_validate_key(key)
        # A client on the backend's own pool, for INCR and EXPIRE in one round trip (the backend
        # would make a new client for each request).
        pipe = client_on(cache._cache._get_connection_pool(write=True)).pipeline()  # type: ignore[attr-defined]
        pipe.incr(full_key)
        pipe.expire(full_key, period_s + 1)
        count, _ = pipe.execute()
        if count <= limit:
            return True
        self.wait_s = (int(now // period_s) + 1) * period_s - now
        return False

    def wait(self) -> float | None:
        return self.wait_s


class ApiSubmitThrottle(ApiUserThrottle):
    """Submissions: a budget of their own instead of the general one."""

    scope = "api-submit"
    setting = "API_SUBMIT_THROTTLE_RATE"
