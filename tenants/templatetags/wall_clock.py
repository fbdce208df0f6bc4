"""Wall-clock instants for people (the audit log, notices, requests): tenants' own template filter,
so its pages load nothing of the scheduler's (`scheduling.templatetags.fleet` renders the fleet
clock and loads this one too)."""

from __future__ import annotations

from datetime import datetime

from django import template
from django.utils import timezone

register = template.Library()


@register.filter
def wall_time(moment: datetime | None) -> str:
    """A wall-clock instant, labelled: ``2026-11-30 14:05 wall time (UTC)``."""
    if moment is None:
        return "—"
    local = timezone.localtime(moment)
    return f"{local:%Y-%m-%d %H:%M} wall time ({local.tzname()})"
