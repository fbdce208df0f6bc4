from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from scheduling.selectors import fleet_summary


@login_required
def dashboard(request: HttpRequest) -> HttpResponse:
    return render(request, "portal/dashboard.html", {"fleet": fleet_summary()})
