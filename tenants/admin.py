from __future__ import annotations

from django.contrib import admin

from tenants.models import (
    AuditEvent,
    Department,
    FleetPolicy,
    Membership,
    Notification,
    PriorityClass,
    Quota,
    QuotaRequest,
    Team,
)


@admin.register(Department)
class DepartmentAdmin(admin.ModelAdmin):
    list_display = ["name"]


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0


class QuotaInline(admin.TabularInline):
    model = Quota
    extra = 0


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    list_display = ["name", "department", "fairshare_weight"]
    list_filter = ["department"]
    prepopulated_fields = {"slug": ["name"]}
    inlines = [MembershipInline, QuotaInline]


@admin.register(Quota)
class QuotaAdmin(admin.ModelAdmin):
    list_display = ["team", "accelerator_type", "guaranteed", "borrow_limit", "lend_limit", "updated_at"]
    list_filter = ["accelerator_type", "team__department"]
    list_select_related = ["team", "accelerator_type"]


@admin.register(QuotaRequest)
class QuotaRequestAdmin(admin.ModelAdmin):
    list_display = ["team", "accelerator_type", "guaranteed", "state", "requested_by", "created_at", "decided_by"]
    list_filter = ["state", "accelerator_type"]
    list_select_related = ["team", "accelerator_type", "requested_by", "decided_by"]
    # Decisions go through the portal's queue so that capacity is checked and the change audited.
    readonly_fields = ["state", "decided_by", "decided_at", "decision_note"]


@admin.register(PriorityClass)
class PriorityClassAdmin(admin.ModelAdmin):
    list_display = ["name", "value", "kind", "preemptible", "may_preempt"]


@admin.register(FleetPolicy)
class FleetPolicyAdmin(admin.ModelAdmin):
    list_display = ["__str__", "backfill", "preemption", "reservation_depth", "updated_at"]


@admin.register(AuditEvent)
class AuditEventAdmin(admin.ModelAdmin):
    list_display = ["created_at", "kind", "team", "actor", "object_repr"]
    list_filter = ["kind", "team"]
    list_select_related = ["team", "actor"]

    def has_change_permission(self, request: object, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: object, obj: object = None) -> bool:
        return False


@admin.register(Notification)
class NotificationAdmin(admin.ModelAdmin):
    list_display = ["created_at", "user", "message", "read"]
    list_filter = ["read"]
    list_select_related = ["user"]
