"""Request budgets per user, counted in the shared Redis (the ``throttle`` cache), so that every
web process enforces one budget. Rates come from settings when a request is throttled, not when
the module is imported, so that a deployment (or a test) may change them."""

from __future__ import annotations

from django.conf import settings
from django.core.cache import caches
from rest_framework.throttling import UserRateThrottle


class ApiUserThrottle(UserRateThrottle):
    scope = "api"
    setting = "API_THROTTLE_RATE"

    def __init__(self) -> None:
        self.cache = caches["throttle"]
        super().__init__()

    def get_rate(self) -> str:
        return str(getattr(settings, self.setting))


class ApiSubmitThrottle(ApiUserThrottle):
    """Submissions: a budget of their own instead of the general one."""

    scope = "api-submit"
    setting = "API_SUBMIT_THROTTLE_RATE"
