"""Job pages: list with pending reasons and estimated starts, detail with history, submit, cancel,
and the fleet map. The list and the job page each have a part that the page re-reads when its
live connection (re)opens and on each event for it, so what they show is never older than a tick."""

from __future__ import annotations

import csv
from collections.abc import Iterator
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.db.models import Q, QuerySet
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from core.auth import AuthenticatedHttpRequest
from core.forms import id_from_text
from scheduling.estimates import estimate_views_for, job_rows_estimated
from scheduling.exports import JOB_HISTORY_FIELDS, JOB_HISTORY_HEADERS, job_history_cells
from scheduling.filters import JobFilter
from scheduling.fleet_calendar import fleet_epoch
from scheduling.forms import JobSubmitForm
from scheduling.incidents import incident_rows
from scheduling.job_rows_html import job_rows_html
from scheduling.listed import listed_by_id
from scheduling.models import Incident, Job, Node
from scheduling.selectors import (
    QuotaLeft,
    default_accelerator_for,
    fleet_map,
    job_events,
    job_for_user,
    job_nodes,
    job_rows,
    jobs_for_user,
    quota_left_for_teams,
)
from scheduling.services.jobs import fleet_now_s, job_cancel, job_submit
from scheduling.services.nodes import (
    NODE_ACTIONS,
    DrainChanged,
    node_action,
    node_action_states,
    node_drain_evictions,
)
from scheduling.services.preview import job_start_preview
from tenants.permissions import is_fleet_admin
from tenants.selectors import teams_for_user

STATE_FILTERS = {
    "active": Job.ACTIVE_STATES,
    "pending": (Job.State.PENDING,),
    "running": (Job.State.RUNNING,),
    "ended": (Job.State.COMPLETED, Job.State.CANCELLED, Job.State.TIMED_OUT),
    "all": None,
}
# Sortable columns: the query parameter's value -> the ordering (newest first breaks ties).
SORTS = {
    "id": ("id",),
    "name": ("name", "-id"),
    "team": ("team__name", "-id"),
    "user": ("submitted_by__username", "-id"),
    "submitted": ("submit_s", "id"),
    "gpus": ("gpus", "-id"),
    "state": ("state", "-id"),
}
SORT_COLUMNS = [
    ("id", "#"),
    ("name", "Name"),
    ("team", "Team"),
    ("user", "Submitted by"),
    ("submitted", "Submitted (fleet time)"),
    ("gpus", "GPUs"),
    ("state", "State"),
    ("", "Why pending / placement"),
    ("", "When (fleet time)"),
]
# Cancelling a gang at least this large asks first: it may hold most of a rack.
CONFIRM_CANCEL_GPUS = 16
CSV_MAX_ROWS = 100_000


def _jobs_listed(request: HttpRequest) -> tuple[QuerySet[Job], str, str, dict[str, Any]]:
    """The user's jobs as the list's query string selects them: a state group (``show``), the
    API's filters (team, user, kind, accelerator, state, submission dates), a search over name and
    id (``q``) and a sort (``sort``, ``-`` first for descending)."""
    show = request.GET.get("show", "active")
    show = show if show in STATE_FILTERS else "active"
    jobs = jobs_for_user(user=request.user, states=STATE_FILTERS[show]).select_related("submitted_by")
    errors: dict[str, Any] = {}
    if request.GET.keys() & JobFilter.base_filters.keys():  # no form for a list that names no filter
        filters = JobFilter(request.GET, queryset=jobs)
        jobs, errors = (filters.qs, {}) if filters.is_valid() else (jobs.none(), filters.errors)
    query = request.GET.get("q", "").strip()[:200]
    if query:
        match = Q(name__icontains=query)
        job_id = id_from_text(query.removeprefix("#"))
        if job_id is not None:
            match |= Q(pk=job_id)
        jobs = jobs.filter(match)
    sort = request.GET.get("sort", "-id")
    if sort.removeprefix("-") not in SORTS:
        sort = "-id"
    first, *ties = SORTS[sort.removeprefix("-")]
    return jobs.order_by(f"-{first}" if sort.startswith("-") else first, *ties), show, sort, errors


@login_required
def job_list(request: HttpRequest) -> HttpResponse | StreamingHttpResponse:
    jobs, show, sort, filter_errors = _jobs_listed(request)
    if request.GET.get("format") == "csv":
        return _jobs_csv(jobs)
    # Lean: the page's ids, then its rows with their related names joined (`scheduling.listed`).
    page = Paginator(jobs.values_list("pk", flat=True), 50).get_page(request.GET.get("page"))
    now_s = fleet_now_s()
    rows = job_rows_estimated(rows=job_rows(jobs=listed_by_id(list(page))), now_s=now_s)
    context = {
        "page": page,
        "rows": rows,
        # Each row links its job: the path built once, not reversed twice per row.
        "rows_html": job_rows_html(rows, job_path=reverse("job-detail", args=[0]).removesuffix("0/"), now_s=now_s),
        "show": show,
        "sort": sort,
        "query": request.GET.get("q", ""),
        "filters": list(STATE_FILTERS),
        "sort_columns": SORT_COLUMNS,
        "filter_errors": filter_errors,
        "now_s": now_s,
        "may_submit": teams_for_user(user=request.user).exists(),
        "querystring": _querystring(request, drop=("page", "part", "format")),
    }
    template = "scheduling/_job_rows.html" if request.GET.get("part") == "rows" else "scheduling/job_list.html"
    return render(request, template, context)


def _querystring(request: HttpRequest, *, drop: tuple[str, ...]) -> str:
    params = request.GET.copy()
    for name in drop:
        params.pop(name, None)
    return params.urlencode()


def _jobs_csv(jobs: QuerySet[Job]) -> StreamingHttpResponse:
    """The filtered history as CSV, streamed, one line per job (``finance.exports``: fleet calendar
    times, hours, team names; text that a spreadsheet would run as a formula written as text)."""

    class Echo:
        def write(self, value: str) -> str:
            return value

    writer = csv.writer(Echo())
    epoch = fleet_epoch()

    def rows() -> Iterator[str]:
        yield writer.writerow(JOB_HISTORY_HEADERS)
        for values in jobs[:CSV_MAX_ROWS].values_list(*JOB_HISTORY_FIELDS).iterator(chunk_size=2000):
            yield writer.writerow(job_history_cells(values, epoch=epoch))

    response = StreamingHttpResponse(rows(), content_type="text/csv")
    response["Content-Disposition"] = 'attachment; filename="fleetline-jobs.csv"'
    return response


def _job_context(request: HttpRequest, job_id: int) -> dict[str, object]:
    # The clock first: a tick that commits between the two reads then shows in the job, never
    # the other way round (a job older than the time it is shown at).
    now_s = fleet_now_s()
    job = job_for_user(user=request.user, job_id=job_id)
    (row,) = job_rows(jobs=[job])
    estimates = estimate_views_for(jobs=[job], waits={job.pk: row.wait} if row.wait else {}, now_s=now_s)
    return {
        "job": job,
        "wait": row.wait,
        "estimate": estimates.get(job.pk),
        "events": job_events(job=job),
        "nodes": job_nodes(job=job),
        "now_s": now_s,
        "confirm_cancel_gpus": CONFIRM_CANCEL_GPUS,
    }


@login_required
def job_detail(request: HttpRequest, job_id: int) -> HttpResponse:
    return render(request, "scheduling/job_detail.html", _job_context(request, job_id))


@login_required
def job_live(request: HttpRequest, job_id: int) -> HttpResponse:
    """The job page's live part alone: the page fetches it when its socket (re)connects and on
    each of the job's events."""
    return render(request, "scheduling/_job_live.html", _job_context(request, job_id))


def _submit_form(request: HttpRequest, data: object | None) -> tuple[JobSubmitForm, dict[int, list[QuotaLeft]]]:
    teams = teams_for_user(user=request.user)
    left = quota_left_for_teams(teams=teams)
    defaults = {team_id: default_accelerator_for(rows) for team_id, rows in left.items()}
    form = JobSubmitForm(data, teams=teams, default_accelerators={k: v for k, v in defaults.items() if v})
    return form, left


@login_required
def job_submit_view(request: AuthenticatedHttpRequest) -> HttpResponse:
    form, left = _submit_form(request, request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            job = job_submit(team=form.cleaned_data["team"], spec=form.spec(), user=request.user)
        except ValidationError as error:
            form.add_service_errors(error)
        else:
            messages.success(request, f"Submitted {job.name}.")
            return redirect("job-detail", job_id=job.pk)
    hints = {
        str(team_id): {
            "default": default_accelerator_for(rows),
            "left": {str(row.accelerator_type_id): row.text for row in rows},
        }
        for team_id, rows in left.items()
    }
    return render(request, "scheduling/job_submit.html", {"form": form, "has_teams": bool(left), "quota_hints": hints})


@login_required
def job_submit_estimate(request: HttpRequest) -> HttpResponse:
    """When the job on the submit form would start if submitted now (a part of the form page)."""
    data = request.GET.copy()
    if not data.get("name", "").strip():
        data["name"] = "preview"  # the name does not change when a job starts
    form, _ = _submit_form(request, data)
    preview = None
    if form.is_valid():
        preview = job_start_preview(team=form.cleaned_data["team"], spec=form.spec())
    return render(request, "scheduling/_start_preview.html", {"form": form, "preview": preview})


@login_required
@require_POST
def job_cancel_view(request: AuthenticatedHttpRequest, job_id: int) -> HttpResponse:
    job = job_for_user(user=request.user, job_id=job_id)
    if job_cancel(job=job, user=request.user):
        messages.success(request, f"Cancelled {job.name}.")
    else:
        messages.error(request, f"{job.name} had already ended.")
    return redirect("job-detail", job_id=job.pk)


# How the fleet map's script describes a node as its occupancy changes live (its placeholders in
# braces): the page's words, sent with the page rather than written into the script.
NODE_WORDS = {
    "summary": "{name} · {accelerator} · {state} · {used} of {gpus} healthy GPUs in use",
    "lost": " ({lost} lost)",
    "no_jobs": "no jobs",
    "changed": "jobs changed since the page loaded",
}


# The drain confirmation's wording, the same on the fleet map's dialog and the confirmation page.
DRAIN_WORDS = {
    "evicts": "It cordons the node and evicts these jobs now, back to their last checkpoints:",
    "none": "No job runs on it now: draining only cordons it.",
    "confirm_one": "Drain and evict 1 job",
    "confirm_many": "Drain and evict {count} jobs",
    "confirm_none": "Drain",
    "job": "#{id} {name}",
    "job_detail": " · {team} · {gpus} GPUs on this node",
}


@login_required
def fleet_map_view(request: HttpRequest) -> HttpResponse:
    pods = fleet_map(user=request.user)
    node_jobs = {node.id: node.jobs for pod in pods for rack in pod.racks for node in rack.nodes if node.jobs}
    admin = is_fleet_admin(request.user)
    return render(
        request,
        "scheduling/fleet_map.html",
        {
            "pods": pods,
            "node_jobs": node_jobs,
            "node_words": NODE_WORDS,
            "admin": admin,
            "evictions": _evictions_data() if admin else {},
            "drain_words": DRAIN_WORDS,
            "actions": node_action_states(),
        },
    )


def _evictions_data() -> dict[int, list[dict[str, object]]]:
    """What a drain of each node would evict, for the fleet map's confirmation (admins only)."""
    return {
        node_id: [
            {
                "id": e.job_id,
                "name": e.name,
                "team": e.team,
                "gpus": e.gpus_on_node,
                "url": reverse("job-detail", args=[e.job_id]),
            }
            for e in evictions
        ]
        for node_id, evictions in node_drain_evictions().items()
    }


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
    confirmed = _job_ids(request.POST.get("evicts")) if action == "drain" else None
    if action == "drain" and confirmed is None:
        return _drain_confirm(request, node, changed=False)
    try:
        node = node_action(
            node=node, action=action, actor=request.user, sim_now_s=fleet_now_s(), confirmed_evictions=confirmed
        )
    except DrainChanged:
        return _drain_confirm(request, node, changed=True)
    messages.success(request, f"{node.name}: {action} done, now {node.get_state_display().lower()}.")
    return redirect("fleet-map")


def _job_ids(text: str | None) -> set[int] | None:
    """``"12,40"`` (the jobs a drain was confirmed to evict; empty: none) as ids; None when not sent
    or not a list of ids."""
    if text is None:
        return None
    ids = [id_from_text(part) for part in text.split(",") if part.strip()]
    return None if None in ids else {i for i in ids if i is not None}


def _drain_confirm(request: HttpRequest, node: Node, *, changed: bool) -> HttpResponse:
    """The page that asks before a drain, listing the jobs it would evict now (also when the jobs
    on the node changed since the admin confirmed: 409, nothing done)."""
    evictions = node_drain_evictions(node_id=node.pk).get(node.pk, [])
    context = {
        "node": node,
        "evictions": evictions,
        "evicts": ",".join(str(e.job_id) for e in evictions),
        "changed": changed,
        "words": DRAIN_WORDS,
    }
    return render(request, "scheduling/node_drain_confirm.html", context, status=409 if changed else 200)


@login_required
def incident_list(request: HttpRequest) -> HttpResponse:
    incidents = Incident.objects.select_related("node").prefetch_related("jobs").order_by("-failed_at", "-id")
    page = Paginator(incidents, 50).get_page(request.GET.get("page"))
    rows = incident_rows(user=request.user, incidents=page)
    return render(request, "scheduling/incident_list.html", {"page": page, "rows": rows, "now_s": fleet_now_s()})
