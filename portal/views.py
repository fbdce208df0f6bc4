from __future__ import annotations

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import redirect, render

from core.charts import (
    SharePoint,
    TeamShare,
    share_figure,
    share_summary_text,
    team_share_figure,
    team_share_summary_text,
    utilisation_figure,
)
from finance.exports import report_csv, report_xlsx
from finance.selectors import finance_report, report_team_ids_for
from finance.services import report_export_request
from finance.views import report_page_context, report_period_choose
from scheduling.selectors import (
    SERVING_SLO_S,
    fleet_samples_recent,
    fleet_summary,
    serving_attainment_last_day,
    team_gpus_now,
)
from scheduling.services.jobs import fleet_now_s
from scheduling.serving_shortfall import serving_blocked

XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"


@login_required
def dashboard(request: HttpRequest) -> HttpResponse:
    points = [
        SharePoint(
            s.sim_time_s, s.serving_gpus, s.training_gpus, s.batch_gpus, s.healthy_gpus, s.pending_jobs, s.capacity_gpus
        )
        for s in fleet_samples_recent()
    ]
    latest = points[-1] if points else None
    teams = [TeamShare(row.label, row.gpus, row.own) for row in team_gpus_now(user=request.user)]
    return render(
        request,
        "portal/dashboard.html",
        {
            "fleet": fleet_summary(),
            "latest": latest,
            "share_chart": share_figure(points),
            "utilisation_chart": utilisation_figure(points),
            "share_summary": share_summary_text(points),
            "team_chart": team_share_figure(teams),
            "team_summary": team_share_summary_text(teams),
            "serving": serving_attainment_last_day(sim_now_s=fleet_now_s()),
            "serving_slo_s": SERVING_SLO_S,
            "serving_blocked": serving_blocked(user=request.user),
        },
    )


@login_required
def usage_report_view(request: HttpRequest) -> HttpResponse:
    """The chargeback report: a month (the current fleet month by default) or a custom range of
    whole fleet calendar days, as a page, CSV or XLSX; long ranges are exported by a worker.
    Finance and fleet admins see every team, a lead their own teams, anyone else a 404."""
    team_ids = report_team_ids_for(user=request.user)
    export = request.GET.get("format")
    choice = report_period_choose(request.GET)
    if choice.errors:
        if export in ("csv", "xlsx"):
            # A download was asked for: say what is wrong in plain text, not in a page.
            return HttpResponseBadRequest("\n".join(choice.errors) + "\n", content_type="text/plain; charset=utf-8")
        return render(request, "portal/report.html", {"choice": choice}, status=400)
    first, last = choice.first, choice.last
    if export in ("csv", "xlsx") and (last - first).days + 1 > settings.FINANCE_SYNC_EXPORT_MAX_DAYS:
        if team_ids is not None:
            return HttpResponseBadRequest(
                f"Exports of more than {settings.FINANCE_SYNC_EXPORT_MAX_DAYS} days are for finance.\n",
                content_type="text/plain; charset=utf-8",
            )
        queued = report_export_request(actor=request.user, first=first, last=last, file_format=export)
        return redirect("finance:export", pk=queued.pk)
    report = finance_report(user=request.user, first=first, last=last)
    name = f"fleetline-chargeback-{first}-{last}"
    if export == "csv":
        response = HttpResponse(report_csv(report), content_type="text/csv; charset=utf-8")
    elif export == "xlsx":
        response = HttpResponse(report_xlsx(report), content_type=XLSX)
    else:
        return render(
            request, "portal/report.html", report_page_context(user=request.user, choice=choice, report=report)
        )
    response["Content-Disposition"] = f'attachment; filename="{name}.{export}"'
    return response
