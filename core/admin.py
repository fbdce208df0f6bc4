"""The Django admin's stance on governed models: it shows them and never writes them.

Quotas, jobs, allocations, nodes, the policy, priority classes, the audit log and the usage
ledger change only through the portal's services, which check permissions and capacity and
record an audit event. Writing them from the admin would be a second path around those checks,
so their admin pages are read-only and point to the page where the change is made."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import Model
from django.http import HttpRequest, HttpResponse
from django.urls import reverse


class GovernedAdmin(admin.ModelAdmin):
    """Read-only: no add, change or delete, whoever asks (superusers included)."""

    change_list_template = "admin/governed_change_list.html"
    change_form_template = "admin/governed_change_form.html"
    # Where the change is made instead, for the note on every page of the model.
    governed_note = "Written by the scheduler only."
    governed_url_name: str | None = None
    governed_url_text = ""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
        return super().changelist_view(request, {**(extra_context or {}), **self._governed_context()})

    def changeform_view(
        self,
        request: HttpRequest,
        object_id: str | None = None,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        context = {**(extra_context or {}), **self._governed_context()}
        return super().changeform_view(request, object_id, form_url, context)

    def _governed_context(self) -> dict[str, Any]:
        url = reverse(self.governed_url_name) if self.governed_url_name else None
        return {"governed_note": self.governed_note, "governed_url": url, "governed_url_text": self.governed_url_text}


class GovernedInline(admin.TabularInline):
    """A read-only inline: the rows show on their parent's page, unchangeable there."""

    extra = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False
