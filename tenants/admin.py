"""Teams and their people in the Django admin. Departments and teams are edited here; a
membership change goes through the membership services, so that the user's open websockets
follow it. Quotas, quota requests, priority classes, the fleet policy, the audit log and
notifications are read-only here: the portal's audited services write them."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.db.models import Model, QuerySet
from django.http import HttpRequest

from core.admin import GovernedAdmin, GovernedInline
from core.auth import signed_in_user
from tenants.models import (
    AuditEvent,
    Department,
    FleetPolicy,
    Membership,
    Notification,
    NotificationPreference,
    PriorityClass,
    Quota,
    QuotaRequest,
    Team,
)
from tenants.services import membership_add, membership_remove, membership_role_change

# A team's fair-share weight: how many times its share of the fleet another team's weight of 1 gets.
MAX_FAIRSHARE_WEIGHT = 1000.0


@admin.register(Department)
class DepartmentAdmin(admin.ModelAdmin):
    list_display = ["name"]


class MembershipInline(GovernedInline):
    model = Membership
    fields = ["user", "role"]
    show_change_link = True


class QuotaInline(GovernedInline):
    model = Quota
    fields = ["accelerator_type", "guaranteed", "borrow_limit", "lend_limit"]


class TeamForm(forms.ModelForm):
    class Meta:
        model = Team
        fields = ["department", "name", "slug", "fairshare_weight"]

    def clean_fairshare_weight(self) -> float:
        weight = float(self.cleaned_data["fairshare_weight"])
        if not 0 < weight <= MAX_FAIRSHARE_WEIGHT:
            raise forms.ValidationError(f"Must be above 0 and at most {MAX_FAIRSHARE_WEIGHT:g}.")
        return weight


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    """Teams are created and renamed here; deleting one would take its usage ledger with it."""

    form = TeamForm
    list_display = ["name", "department", "fairshare_weight"]
    list_filter = ["department"]
    prepopulated_fields = {"slug": ["name"]}
    inlines = [MembershipInline, QuotaInline]

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    """Every add, role change and removal goes through the membership services."""

    list_display = ["team", "user", "role"]
    list_filter = ["role", "team"]
    list_select_related = ["team", "user"]
    search_fields = ["user__username", "team__name"]
    raw_id_fields = ["user"]

    def get_readonly_fields(self, request: HttpRequest, obj: Model | None = None) -> list[str]:
        # A membership changes role; moving it to another user or team is a removal and an add.
        return ["team", "user"] if obj is not None else []

    def save_model(self, request: HttpRequest, obj: Membership, form: Any, change: bool) -> None:
        if change:
            membership_role_change(actor=signed_in_user(request), membership_id=obj.pk, role=obj.role)
        else:
            obj.pk = membership_add(actor=signed_in_user(request), team=obj.team, user=obj.user, role=obj.role).pk

    def delete_model(self, request: HttpRequest, obj: Membership) -> None:
        membership_remove(actor=signed_in_user(request), membership_id=obj.pk)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Membership]) -> None:
        for membership_id in queryset.values_list("pk", flat=True):
            membership_remove(actor=signed_in_user(request), membership_id=membership_id)


@admin.register(Quota)
class QuotaAdmin(GovernedAdmin):
    governed_note = (
        "A team's lead files a quota request on the team page; a fleet admin approves it in the quota "
        "queue, which checks the fleet's capacity and records the change in the audit log."
    )
    governed_url_name = "tenants:quota_queue"
    governed_url_text = "Quota requests"
    list_display = ["team", "accelerator_type", "guaranteed", "borrow_limit", "lend_limit", "updated_at"]
    list_filter = ["accelerator_type", "team__department"]
    list_select_related = ["team", "accelerator_type"]


@admin.register(QuotaRequest)
class QuotaRequestAdmin(GovernedAdmin):
    governed_note = "Quota requests are filed on the team page and decided in the quota queue."
    governed_url_name = "tenants:quota_queue"
    governed_url_text = "Quota requests"
    list_display = [
        "team",
        "accelerator_type",
        "guaranteed",
        "state",
        "requested_by",
        "created_at",
        "decided_by",
        "self_approved",
    ]
    list_filter = ["state", "accelerator_type"]
    list_select_related = ["team", "accelerator_type", "requested_by", "decided_by"]


@admin.register(PriorityClass)
class PriorityClassAdmin(GovernedAdmin):
    governed_note = "Priority classes are edited on the policy page, each save audited."
    governed_url_name = "tenants:policy"
    governed_url_text = "Policy"
    list_display = ["name", "value", "kind", "preemptible", "may_preempt"]


@admin.register(FleetPolicy)
class FleetPolicyAdmin(GovernedAdmin):
    governed_note = "The fleet policy is edited on the policy page, each change audited."
    governed_url_name = "tenants:policy"
    governed_url_text = "Policy"
    list_display = ["__str__", "backfill", "preemption", "reservation_depth", "updated_at"]


@admin.register(AuditEvent)
class AuditEventAdmin(GovernedAdmin):
    governed_note = "The audit log is appended to by the services whose changes it records."
    governed_url_name = "tenants:audit_log"
    governed_url_text = "Audit log"
    list_display = ["created_at", "kind", "team", "actor", "object_repr"]
    list_filter = ["kind", "team"]
    list_select_related = ["team", "actor"]


@admin.register(Notification)
class NotificationAdmin(GovernedAdmin):
    governed_note = "Notifications are sent by the services whose events they report."
    list_display = ["created_at", "user", "kind", "message", "read"]
    list_filter = ["read", "kind"]
    list_select_related = ["user"]


@admin.register(NotificationPreference)
class NotificationPreferenceAdmin(GovernedAdmin):
    governed_note = "Each person chooses what they are told on their own notification settings page."
    governed_url_name = "tenants:notification_settings"
    governed_url_text = "Notification settings"
    list_display = ["user", "kind", "in_app", "email"]
    list_filter = ["kind"]
    list_select_related = ["user"]
