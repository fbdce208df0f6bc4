"""Login lockout (django-axes, configured in settings): the page a locked-out login gets, and the
plumbing from axes' lockout signal to the audit log."""

from __future__ import annotations

from typing import Any

from axes.signals import user_locked_out
from django.conf import settings
from django.dispatch import receiver
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from tenants.services.audit import login_lockout_record

# What axes answers a refused login with: Too Many Requests.
LOCKOUT_STATUS = 429


def lockout_response(
    request: HttpRequest, original_response: HttpResponse | None = None, credentials: dict[str, Any] | None = None
) -> HttpResponse:
    """The login page's answer while a username is locked out from the caller's address."""
    context = {
        "username": (credentials or {}).get("username") or request.POST.get("username", ""),
        "cooloff_minutes": round(settings.AXES_COOLOFF_TIME.total_seconds() / 60),
    }
    return render(request, "registration/locked_out.html", context, status=LOCKOUT_STATUS)


@receiver(user_locked_out, dispatch_uid="portal.login_lockout.lockout_audit")
def lockout_audit(
    sender: Any, *, request: HttpRequest, username: str | None, ip_address: str | None, **kwargs: Any
) -> None:
    """Axes signals on every refused attempt from the one that reaches the limit on; the audit log
    records the lockout once, at that attempt (each further one restarts the wait instead)."""
    failures = int(getattr(request, "axes_failures_since_start", 0))
    if failures == settings.AXES_FAILURE_LIMIT:
        login_lockout_record(username=username or "", ip_address=ip_address or "", failures=failures)
