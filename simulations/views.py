"""What-if replay pages: the list with a form to start one, a replay's progress and results beside
the current policy, cancelling, and the simulator's HTML report."""

from __future__ import annotations

from csp.constants import SELF, UNSAFE_INLINE
from csp.decorators import csp_replace
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.clickjacking import xframe_options_sameorigin
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from simulations.forms import SimulationForm
from simulations.inputs import upload_size_check
from simulations.models import Simulation
from simulations.presentation import dropped_text, metric_groups
from simulations.selectors import simulation_for_user, simulations_for_user
from simulations.services import (
    SimulationRequest,
    simulation_cancel,
    simulation_report_html,
    simulation_start,
)
from tenants.models import Membership, Team
from tenants.permissions import is_fleet_admin


def _startable_teams(request: HttpRequest) -> tuple[list[Team], bool]:
    """Teams the user may replay for, and whether they may replay the whole fleet."""
    if is_fleet_admin(request.user):
        return list(Team.objects.order_by("name")), True
    if not request.user.is_authenticated:
        return [], False
    led = Membership.objects.filter(user_id=request.user.pk, role=Membership.Role.LEAD).values("team_id")
    return list(Team.objects.filter(id__in=led).order_by("name")), False


def _form_request(form: SimulationForm) -> SimulationRequest:
    data = form.cleaned_data
    upload = data.get("trace")
    return SimulationRequest(
        source=data["source"],
        preset=data["preset"],
        team=form.chosen_team(),
        trace_name=upload.name if upload else "",
        # Read one byte past the bound, so a larger file is refused without reading it all.
        trace_data=upload.read(settings.SIMULATION_MAX_TRACE_BYTES + 1) if upload else None,
        trace_format=data["trace_format"],
        history_days=data.get("history_days"),
        policy_settings=form.policy_settings(),
        fleet_spec=data.get("fleet_spec") or "",
        seed=data.get("seed") or 0,
    )


def _started(request: HttpRequest, form: SimulationForm) -> Simulation | None:
    """Start the replay the form asks for; its problems go beside the form's fields."""
    if not form.is_valid():
        return None
    try:
        return simulation_start(user=request.user, request=_form_request(form))
    except ValidationError as error:
        for field, problems in error.message_dict.items():
            form.add_error(field if field in form.fields else None, problems)
    except PermissionDenied as error:
        form.add_error("team", str(error))
    return None


@login_required
@require_http_methods(["GET", "POST"])
def simulation_list(request: HttpRequest) -> HttpResponse:
    teams, fleet_wide = _startable_teams(request)
    if not teams and not fleet_wide:
        # Team members and finance see what replays are and who may start them; nothing else.
        return render(
            request, "simulations/list.html", {"can_start": False}, status=403 if request.method == "POST" else 200
        )
    upload_error = None
    if request.method == "POST":
        upload_error = _oversized(request)
        if upload_error:
            # Above the bound the body is not read: the form is shown again empty, with the reason.
            form = SimulationForm(teams=teams, fleet_wide=fleet_wide)
        else:
            form = SimulationForm(request.POST, request.FILES, teams=teams, fleet_wide=fleet_wide)
            simulation = _started(request, form)
            if simulation is not None:
                messages.success(request, f"Replay #{simulation.pk} queued.")
                return redirect("simulations:detail", simulation.pk)
    else:
        form = SimulationForm(teams=teams, fleet_wide=fleet_wide)
    return render(
        request,
        "simulations/list.html",
        {
            "can_start": True,
            "upload_error": upload_error,
            "form": form,
            "simulations": simulations_for_user(user=request.user)[:50],
            "max_trace_bytes": settings.SIMULATION_MAX_TRACE_BYTES,
            "max_jobs": settings.SIMULATION_MAX_JOBS,
            "max_wall_s": settings.SIMULATION_MAX_WALL_S,
        },
        status=400 if request.method == "POST" else 200,
    )


def _oversized(request: HttpRequest) -> str | None:
    try:
        upload_size_check(content_length=request.META.get("CONTENT_LENGTH"))
    except ValidationError as error:
        return " ".join(error.messages)
    return None


@login_required
@require_GET
def simulation_detail(request: HttpRequest, simulation_id: int) -> HttpResponse:
    simulation = simulation_for_user(user=request.user, simulation_id=simulation_id)
    return render(
        request,
        "simulations/detail.html",
        {
            "simulation": simulation,
            "groups": metric_groups(simulation.results),
            "dropped": dropped_text(simulation.results),
        },
    )


@login_required
@require_GET
def simulation_progress(request: HttpRequest, simulation_id: int) -> JsonResponse:
    simulation = simulation_for_user(user=request.user, simulation_id=simulation_id)
    return JsonResponse(
        {
            "state": simulation.state,
            "state_label": simulation.get_state_display(),
            "progress": simulation.progress,
            "finished": simulation.finished,
        }
    )


@login_required
@require_POST
def simulation_cancel_view(request: HttpRequest, simulation_id: int) -> HttpResponse:
    simulation = simulation_cancel(simulation=simulation_for_user(user=request.user, simulation_id=simulation_id))
    if simulation.state == simulation.State.CANCELLED:
        messages.success(request, f"Replay #{simulation.pk} cancelled.")
    elif simulation.cancel_requested and not simulation.finished:
        messages.success(request, f"Replay #{simulation.pk} stops within a second or two.")
    else:
        messages.info(request, f"Replay #{simulation.pk} had already ended.")
    return redirect("simulations:detail", simulation.pk)


@login_required
@require_GET
@xframe_options_sameorigin
# The simulator's report is one self-contained document whose charts are inline scripts and
# styles: it may run them, but sandboxed (an origin of its own: no cookies, no session, no access
# to the page that frames it), and only this site may frame it.
@csp_replace(  # type: ignore[arg-type]  # django-csp types views as taking the request alone
    {
        "script-src": [SELF, UNSAFE_INLINE],
        "style-src": [SELF, UNSAFE_INLINE],
        "frame-ancestors": [SELF],
        "sandbox": ["allow-scripts"],
    }
)
def simulation_report(request: HttpRequest, simulation_id: int) -> HttpResponse:
    html = simulation_report_html(simulation=simulation_for_user(user=request.user, simulation_id=simulation_id))
    if html is None:
        raise Http404("This replay has no report.")
    return HttpResponse(html)
