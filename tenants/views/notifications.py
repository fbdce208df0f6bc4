from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from core.auth import AuthenticatedHttpRequest
from core.forms import id_from_text
from tenants import selectors, services
from tenants.forms import NotificationPreferencesForm


@login_required
def notification_list(request: HttpRequest) -> HttpResponse:
    notices = selectors.notifications_for_user(user=request.user)
    page = Paginator(notices, 50).get_page(request.GET.get("page"))
    return render(request, "tenants/notifications.html", {"page": page})


@login_required
@require_POST
def notification_read(request: AuthenticatedHttpRequest) -> HttpResponse:
    """Mark one notice (``id`` in the form) or, without an id, all of them read; only ever the
    user's own. An id that is no id is refused rather than taken for "all"."""
    raw_id = request.POST.get("id", "")
    notification_id = id_from_text(raw_id) if raw_id else None
    if raw_id and notification_id is None:
        return HttpResponseBadRequest("The notice's id must be a whole number.", content_type="text/plain")
    services.notification_mark_read(user=request.user, notification_id=notification_id)
    return redirect("tenants:notifications")


@login_required
def notification_settings(request: AuthenticatedHttpRequest) -> HttpResponse:
    """The user's own choice, per kind of notice, of being told in the app and by e-mail."""
    current = selectors.notification_preferences_for_user(user=request.user)
    form = NotificationPreferencesForm(request.POST or None, initial_channels=current)
    if request.method == "POST" and form.is_valid():
        services.notification_preferences_save(user=request.user, choices=form.channels())
        messages.success(request, "Saved: you are told of each kind as ticked.")
        return redirect("tenants:notification_settings")
    return render(request, "tenants/notification_settings.html", {"form": form, "has_email": bool(request.user.email)})
