from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from portal.charts import SharePoint, share_figure, utilisation_figure
from scheduling.selectors import fleet_samples_recent, fleet_summary


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
        },
    )
