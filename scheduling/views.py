"""Job pages: list with pending reasons and estimated starts, detail with history, submit, cancel,
and the fleet map."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from scheduling.forms import JobSubmitForm
from scheduling.models import Incident, Job, Node
from scheduling.selectors import fleet_map, job_events, job_for_user, job_nodes, jobs_for_user
from scheduling.services.failures import NODE_ACTIONS, node_action
from scheduling.services.jobs import fleet_now_s, job_cancel, job_submit
from scheduling.services.pending import pending_info_for
from tenants.permissions import is_fleet_admin
from tenants.selectors import teams_for_user

STATE_FILTERS = {
    "active": Job.ACTIVE_STATES,
    "pending": (Job.State.PENDING,),
    "running": (Job.State.RUNNING,),
    "ended": (Job.State.COMPLETED, Job.State.CANCELLED, Job.State.TIMED_OUT),
}


@login_required
def job_list(request: HttpRequest) -> HttpResponse:
    show = request.GET.get("show", "active")
    jobs = jobs_for_user(user=request.user, states=STATE_FILTERS.get(show, Job.ACTIVE_STATES)).order_by("-id")
    page = Paginator(jobs, 50).get_page(request.GET.get("page"))
    pending = pending_info_for(job_ids=[job.pk for job in page if job.state == Job.State.PENDING])
    for job in page:
        job.pending = pending.get(job.pk)
    return render(
        request,
        "scheduling/job_list.html",
        {"page": page, "show": show, "filters": list(STATE_FILTERS), "now_s": fleet_now_s()},
    )


@login_required
def job_detail(request: HttpRequest, job_id: int) -> HttpResponse:
    job = job_for_user(user=request.user, job_id=job_id)
    job.pending = pending_info_for(job_ids=[job.pk]).get(job.pk) if job.state == Job.State.PENDING else None
    return render(
        request,
        "scheduling/job_detail.html",
        {
            "job": job,
            "events": job_events(job=job),
            "nodes": job_nodes(job=job),
            "now_s": fleet_now_s(),
        },
    )


@login_required
def job_submit_view(request: HttpRequest) -> HttpResponse:
    teams = teams_for_user(user=request.user)
    form = JobSubmitForm(request.POST or None, teams=teams)
    if request.method == "POST" and form.is_valid():
        try:
            job = job_submit(team=form.cleaned_data["team"], spec=form.spec(), user=request.user)
        except ValidationError as error:
            form.add_service_errors(error)
        else:
            messages.success(request, f"Submitted {job.name}.")
            return redirect("job-detail", job_id=job.pk)
    return render(request, "scheduling/job_submit.html", {"form": form, "has_teams": teams.exists()})


@login_required
@require_POST
def job_cancel_view(request: HttpRequest, job_id: int) -> HttpResponse:
    job = job_for_user(user=request.user, job_id=job_id)
    if job_cancel(job=job, user=request.user):
        messages.success(request, f"Cancelled {job.name}.")
    else:
        messages.error(request, f"{job.name} had already ended.")
    return redirect("job-detail", job_id=job.pk)


@login_required
def fleet_map_view(request: HttpRequest) -> HttpResponse:
    admin = is_fleet_admin(request.user)
    nodes = Node.objects.order_by("name").only("id", "name", "state") if admin else None
    return render(
        request,
        "scheduling/fleet_map.html",
        {"pods": fleet_map(user=request.user), "admin_nodes": nodes, "actions": NODE_ACTIONS},
    )


@login_required
@require_POST
def node_action_view(request: HttpRequest) -> HttpResponse:
    """Cordon, uncordon or drain a node: fleet admins only (everyone else sees no such page)."""
    action = request.POST.get("action", "")
    if not is_fleet_admin(request.user) or action not in NODE_ACTIONS:
        raise Http404("No such page.")
    try:
        node = Node.objects.get(pk=int(request.POST.get("node", "")))
    except (ValueError, Node.DoesNotExist) as error:
        raise Http404("No such node.") from error
    node = node_action(node=node, action=action, actor=request.user, sim_now_s=fleet_now_s())
    messages.success(request, f"{node.name}: {action} done, now {node.get_state_display().lower()}.")
    return redirect("fleet-map")


@login_required
def incident_list(request: HttpRequest) -> HttpResponse:
    incidents = Incident.objects.select_related("node").prefetch_related("jobs").order_by("-failed_at", "-id")
    page = Paginator(incidents, 50).get_page(request.GET.get("page"))
    return render(request, "scheduling/incident_list.html", {"page": page, "now_s": fleet_now_s()})
