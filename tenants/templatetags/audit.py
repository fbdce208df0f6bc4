"""Template filters for the audit log."""

from __future__ import annotations

from django import template

from tenants.audit_text import Change, audit_changes
from tenants.models import AuditEvent

register = template.Library()


@register.filter
def changes(event: AuditEvent) -> list[Change]:
    """What an audit entry changed, field by field (`tenants.audit_text`)."""
    return audit_changes(before=event.before, after=event.after)
