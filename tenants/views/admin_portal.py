"""Fleet-admin pages: the quota approval queue, priority classes and policy, the audit log.

Everyone else gets a 404, so the pages' existence does not leak either.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse, QueryDict
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from core.auth import AuthenticatedHttpRequest
from tenants import selectors, services
from tenants.forms import ApproveForm, AuditFilterForm, FleetPolicyForm, PriorityClassForm, RejectForm
from tenants.models import PriorityClass, QuotaRequest
from tenants.permissions import require_fleet_admin

AUDIT_PAGE_SIZE = 50


def _posted(request: HttpRequest) -> QueryDict | None:
    return request.POST if request.method == "POST" else None


@login_required
def quota_queue(request: HttpRequest) -> HttpResponse:
    require_fleet_admin(request.user)
    return render(request, "tenants/quota_queue.html", {"rows": selectors.pending_requests_for_admin()})


@login_required
@require_POST
def quota_request_decide(request: AuthenticatedHttpRequest, pk: int, decision: str) -> HttpResponse:
    require_fleet_admin(request.user)
    form = (ApproveForm if decision == "approve" else RejectForm)(request.POST)
    if not form.is_valid():
        for errors in form.errors.values():
            messages.error(request, " ".join(str(error) for error in errors))
        return redirect("tenants:quota_queue")
    try:
        if decision == "approve":
            services.quota_request_approve(admin=request.user, quota_request_id=pk, **form.cleaned_data)
        else:
            services.quota_request_reject(admin=request.user, quota_request_id=pk, **form.cleaned_data)
    except QuotaRequest.DoesNotExist:
        raise Http404("No such request.") from None
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
    except PermissionDenied as exc:
        # The admin's own request while another fleet admin can decide it.
        messages.error(request, str(exc))
    else:
        messages.success(request, "Request approved." if decision == "approve" else "Request rejected.")
    return redirect("tenants:quota_queue")


@login_required
@require_http_methods(["GET", "POST"])
def policy(request: AuthenticatedHttpRequest) -> HttpResponse:
    require_fleet_admin(request.user)
    current = selectors.fleet_policy_get()
    form = FleetPolicyForm(_posted(request), instance=current)
    if request.method == "POST" and form.is_valid():
        try:
            services.fleet_policy_update(actor=request.user, changes=form.cleaned_data)
        except ValidationError as exc:
            form.add_service_errors(exc)
        else:
            messages.success(request, "Fleet policy saved; it applies from the next scheduling cycle.")
            return redirect("tenants:policy")
    context = {
        "form": form,
        "priority_classes": PriorityClass.objects.all(),
        "engine_only": selectors.engine_only_knobs(),
    }
    return render(request, "tenants/policy.html", context, status=400 if form.errors else 200)


@login_required
@require_http_methods(["GET", "POST"])
def priority_class_edit(request: AuthenticatedHttpRequest, pk: int | None = None) -> HttpResponse:
    require_fleet_admin(request.user)
    instance = get_object_or_404(PriorityClass, pk=pk) if pk is not None else None
    form = PriorityClassForm(_posted(request), instance=instance)
    if request.method == "POST" and form.is_valid():
        try:
            services.priority_class_save(actor=request.user, priority_class_id=pk, **form.cleaned_data)
        except ValidationError as exc:
            form.add_error(None, exc)
        else:
            messages.success(request, f"Priority class {form.cleaned_data['name']} saved.")
            return redirect("tenants:policy")
    context = {"form": form, "priority_class": instance}
    return render(request, "tenants/priority_class_form.html", context, status=400 if form.errors else 200)


@login_required
def audit_log(request: HttpRequest) -> HttpResponse:
    require_fleet_admin(request.user)
    filters = AuditFilterForm(request.GET or None)
    kind, team = None, None
    if filters.is_valid():
        kind, team = filters.cleaned_data["kind"] or None, filters.cleaned_data["team"]
    events = selectors.audit_events(kind=kind, team=team)
    page = Paginator(events, AUDIT_PAGE_SIZE).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    context = {"filters": filters, "page": page, "query": query.urlencode()}
    return render(request, "tenants/audit_log.html", context)
