"""Write-side operations for tenants: each one owns its write and everything it triggers
(audit entry, notifications, email after commit). Keyword-only, named ``<entity>_<verb>``."""

from __future__ import annotations

from tenants.services.audit import audit_record
from tenants.services.demo import demo_quotas_seed
from tenants.services.memberships import membership_add, membership_remove, membership_role_change
from tenants.services.notifications import (
    notice_deliver,
    notification_mark_read,
    notification_preferences_save,
    notification_send,
)
from tenants.services.policy import fleet_policy_update, priority_class_save
from tenants.services.quota_requests import (
    quota_request_approve,
    quota_request_reject,
    quota_request_submit,
    quota_request_withdraw,
)
from tenants.services.quotas import quota_set

__all__ = [
    "audit_record",
    "demo_quotas_seed",
    "fleet_policy_update",
    "membership_add",
    "membership_remove",
    "membership_role_change",
    "notice_deliver",
    "notification_mark_read",
    "notification_preferences_save",
    "notification_send",
    "priority_class_save",
    "quota_request_approve",
    "quota_request_reject",
    "quota_request_submit",
    "quota_request_withdraw",
    "quota_set",
]
