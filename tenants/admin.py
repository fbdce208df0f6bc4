from __future__ import annotations

from django.contrib import admin

from tenants.models import Department, Membership, Team


@admin.register(Department)
class DepartmentAdmin(admin.ModelAdmin):
    list_display = ["name"]


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    list_display = ["name", "department", "fairshare_weight"]
    list_filter = ["department"]
    prepopulated_fields = {"slug": ["name"]}
    inlines = [MembershipInline]
