"""Team pages: the quota table, usage over time, fair-share standing, members (leads add and
remove members, admins also leads), the request history and the lead's request form; for fleet
admins, every team's quota, use and queue at a glance."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpRequest, HttpResponse, QueryDict
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from core.auth import AuthenticatedHttpRequest
from tenants import selectors, services
from tenants.forms import MemberAddForm, QuotaRequestForm
from tenants.models import Membership, QuotaRequest, Team
from tenants.permissions import can_manage_team_quota, is_fleet_admin
from tenants.team_activity import team_activity


def _posted(request: HttpRequest) -> QueryDict | None:
    return request.POST if request.method == "POST" else None


@login_required
def team_list(request: HttpRequest) -> HttpResponse:
    teams = selectors.teams_for_user(user=request.user).select_related("department")
    return render(request, "tenants/team_list.html", {"rows": team_activity().overview_rows(teams=teams)})


@login_required
@require_http_methods(["GET", "POST"])
def team_detail(request: AuthenticatedHttpRequest, slug: str) -> HttpResponse:
    team = selectors.team_for_user(user=request.user, slug=slug)
    can_manage = can_manage_team_quota(request.user, team)
    quotas = team_activity().quota_overview(team=team)
    choices = [(row.accelerator_type, row.accelerator_type) for row in quotas]
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
    status = 400 if form and form.errors else 200
    return _team_page(request, team, is_lead=can_manage, quotas=quotas, quota_form=form, status=status)


def _team_page(
    request: HttpRequest,
    team: Team,
    *,
    is_lead: bool | None = None,
    quotas: list[selectors.QuotaRow] | None = None,
    quota_form: QuotaRequestForm | None = None,
    member_form: MemberAddForm | None = None,
    status: int = 200,
) -> HttpResponse:
    can_manage = can_manage_team_quota(request.user, team) if is_lead is None else is_lead
    if quotas is None:
        quotas = team_activity().quota_overview(team=team)
    if quota_form is None and can_manage:
        choices = [(row.accelerator_type, row.accelerator_type) for row in quotas]
        quota_form = QuotaRequestForm(accelerator_choices=choices)
    context = {
        "team": team,
        "can_manage": can_manage,
        "form": quota_form,
        "quotas": quotas,
        "quota_requests": selectors.quota_requests_for_team(team=team),
        **_members_context(request, team, is_lead=can_manage, member_form=member_form),
        **team_activity().page_context(team=team),
    }
    return render(request, "tenants/team_detail.html", context, status=status)


def _members_context(
    request: HttpRequest, team: Team, *, is_lead: bool, member_form: MemberAddForm | None
) -> dict[str, object]:
    admin = is_fleet_admin(request.user)
    may_manage = admin or is_lead
    return {
        "members": Membership.objects.filter(team=team).select_related("user").order_by("role", "user__username"),
        "may_manage_members": may_manage,
        "may_appoint_leads": admin,
        "member_form": member_form or (MemberAddForm(may_appoint_leads=admin) if may_manage else None),
    }


@login_required
@require_POST
def team_member_add(request: AuthenticatedHttpRequest, slug: str) -> HttpResponse:
    team = selectors.team_for_user(user=request.user, slug=slug)
    admin = is_fleet_admin(request.user)
    if not (admin or can_manage_team_quota(request.user, team)):
        raise Http404("No such page.")
    form = MemberAddForm(request.POST, may_appoint_leads=admin)
    if form.is_valid():
        user = form.cleaned_data["username"]
        try:
            services.membership_add(
                actor=request.user, team=team, user=user, role=form.cleaned_data.get("role", Membership.Role.MEMBER)
            )
        except ValidationError as exc:
            form.add_error("username", " ".join(exc.messages))
        except PermissionDenied as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, f"Added {user.get_username()} to {team.name}.")
            return redirect("tenants:team_detail", slug=team.slug)
    return _team_page(request, team, member_form=form, status=400)


@login_required
@require_POST
def team_member_remove(request: AuthenticatedHttpRequest, slug: str, pk: int) -> HttpResponse:
    team = selectors.team_for_user(user=request.user, slug=slug)
    membership = Membership.objects.filter(pk=pk, team=team).select_related("user").first()
    if membership is None:
        raise Http404("No such member.")
    try:
        services.membership_remove(actor=request.user, membership_id=membership.pk)
    except PermissionDenied as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Removed {membership.user.get_username()} from {team.name}.")
    return redirect("tenants:team_detail", slug=team.slug)


@login_required
@require_POST
def quota_request_withdraw(request: AuthenticatedHttpRequest, slug: str, pk: int) -> HttpResponse:
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
