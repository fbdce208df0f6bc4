from __future__ import annotations

from datetime import datetime, time, timedelta

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import render
from django.utils import timezone

from portal.charts import SharePoint, share_figure, utilisation_figure
from portal.exports import usage_csv, usage_xlsx
from portal.forms import ReportPeriodForm
from scheduling.selectors import fleet_samples_recent, fleet_summary, usage_report
from scheduling.services.jobs import fleet_now_s
from scheduling.services.serving import SERVING_SLO_S, serving_attainment_last_day
from tenants.permissions import is_finance, is_fleet_admin

XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"


@login_required
def dashboard(request: HttpRequest) -> HttpResponse:
    points = [
        SharePoint(s.sim_time_s, s.serving_gpus, s.training_gpus, s.batch_gpus, s.healthy_gpus, s.pending_jobs)
        for s in fleet_samples_recent()
    ]
    latest = points[-1] if points else None
    return render(
        request,
        "portal/dashboard.html",
        {
            "fleet": fleet_summary(),
            "latest": latest,
            "share_chart": share_figure(points),
            "utilisation_chart": utilisation_figure(points),
            "serving": serving_attainment_last_day(sim_now_s=fleet_now_s()),
            "serving_slo_s": SERVING_SLO_S,
        },
    )


@login_required
def usage_report_view(request: HttpRequest) -> HttpResponse:
    """Utilisation and chargeback per team for a period: a table, or CSV / XLSX downloads."""
    if not (is_finance(request.user) or is_fleet_admin(request.user)):
        raise Http404("No such page.")
    form = ReportPeriodForm(request.GET or None)
    export = request.GET.get("format")
    if not form.is_valid():
        if export in ("csv", "xlsx"):
            # A download was asked for: say what is wrong in plain text, not in a page.
            problems = dict.fromkeys(message for messages in form.errors.values() for message in messages)
            return HttpResponseBadRequest("\n".join(problems) + "\n", content_type="text/plain; charset=utf-8")
        return render(request, "portal/report.html", {"form": form}, status=400 if request.GET else 200)
    start, end = form.cleaned_data["start"], form.cleaned_data["end"]
    zone = timezone.get_current_timezone()
    rows, totals = usage_report(
        start=datetime.combine(start, time.min, zone), end=datetime.combine(end + timedelta(days=1), time.min, zone)
    )
    name = f"fleetline-usage-{start}-{end}"
    if export == "csv":
        response = HttpResponse(usage_csv(rows, totals), content_type="text/csv")
    elif export == "xlsx":
        response = HttpResponse(usage_xlsx(rows, totals), content_type=XLSX)
    else:
        return render(request, "portal/report.html", {"form": form, "rows": rows, "totals": totals})
    response["Content-Disposition"] = f'attachment; filename="{name}.{export}"'
    return response
