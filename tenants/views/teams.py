"""Team pages: the quota table, the request history and the lead's request form."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpRequest, HttpResponse, QueryDict
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from scheduling.selectors import pending_jobs_for_team
from scheduling.services.jobs import fleet_now_s
from tenants import selectors, services
from tenants.forms import QuotaRequestForm
from tenants.models import QuotaRequest
from tenants.permissions import can_manage_team_quota


def _posted(request: HttpRequest) -> QueryDict | None:
    return request.POST if request.method == "POST" else None


@login_required
def team_list(request: HttpRequest) -> HttpResponse:
    return render(request, "tenants/team_list.html", {"teams": selectors.teams_for_user(user=request.user)})


@login_required
@require_http_methods(["GET", "POST"])
def team_detail(request: HttpRequest, slug: str) -> HttpResponse:
    team = selectors.team_for_user(user=request.user, slug=slug)
    can_manage = can_manage_team_quota(request.user, team)
    quotas = selectors.quota_overview_for_team(team=team)
    choices = [(row.accelerator_type_id, row.accelerator_type) for row in quotas]
    form = QuotaRequestForm(_posted(request), accelerator_choices=choices) if can_manage else None
    if request.method == "POST":
        if form is None:
            raise Http404("No such page.")
        if form.is_valid():
            try:
                services.quota_request_submit(user=request.user, team=team, **form.cleaned_data)
            except ValidationError as exc:
                form.add_error(None, exc)
            else:
                messages.success(request, "Quota request filed; a fleet admin will decide it.")
                return redirect("tenants:team_detail", slug=team.slug)
    context = {
        "team": team,
        "can_manage": can_manage,
        "form": form,
        "quotas": quotas,
        "quota_requests": selectors.quota_requests_for_team(team=team),
        "pending_jobs": pending_jobs_for_team(team=team),
        "now_s": fleet_now_s(),
    }
    return render(request, "tenants/team_detail.html", context, status=400 if form and form.errors else 200)


@login_required
@require_POST
def quota_request_withdraw(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    team = selectors.team_for_user(user=request.user, slug=slug)
    if not QuotaRequest.objects.filter(pk=pk, team=team).exists():
        raise Http404("No such request.")
    try:
        services.quota_request_withdraw(user=request.user, quota_request_id=pk)
    except PermissionDenied:
        raise Http404("No such request.") from None
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
    else:
        messages.success(request, "Request withdrawn.")
    return redirect("tenants:team_detail", slug=team.slug)
