"""Finance pages: the report's period choice and context (the report page itself is
``portal.views.usage_report_view``), rates, budgets, month close, per-job detail, exports."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBadRequest, QueryDict
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from core.forms import ReportPeriodForm
from finance import services
from finance.charts import cost_by_team_figure, gpu_hours_by_team_figure, serving_training_figure
from finance.exports import jobs_csv
from finance.forms import BudgetForm, JobFilterForm, MonthForm, RateForm, ReopenForm, parse_month
from finance.models import Budget, ReportExport
from finance.selectors import (
    FinanceReport,
    budget_statuses,
    job_lines,
    month_close_active,
    months_closed,
    rate_history,
    report_team_ids_for,
)
from scheduling.fleet_calendar import fleet_today, month_bounds
from tenants.permissions import is_finance, is_fleet_admin

XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"


@dataclass
class PeriodChoice:
    """What the period picker asked for: a month (``?month=2026-03``), a custom range
    (``?start=...&end=...``) or, with neither, the current fleet calendar month."""

    month: str = ""
    start: str = ""
    end: str = ""
    first: date = date.min
    last: date = date.min
    errors: list[str] = field(default_factory=list)

    @property
    def is_month(self) -> bool:
        return bool(self.month)

    def query(self, **extra: str) -> str:
        params = QueryDict(mutable=True)
        if self.is_month:
            params["month"] = self.month
        else:
            params["start"], params["end"] = self.start, self.end
        params.update(extra)
        return params.urlencode()


def _month_text(day: date) -> str:
    return f"{day:%Y-%m}"


def report_period_choose(params: QueryDict) -> PeriodChoice:
    if params.get("start") or params.get("end"):
        form = ReportPeriodForm(params)
        choice = PeriodChoice(start=params.get("start", ""), end=params.get("end", ""))
        if not form.is_valid():
            choice.errors = list(dict.fromkeys(str(m) for ms in form.errors.values() for m in ms))
            return choice
        choice.first, choice.last = form.cleaned_data["start"], form.cleaned_data["end"]
        return choice
    month = params.get("month") or _month_text(fleet_today())
    choice = PeriodChoice(month=month)
    try:
        year, number = parse_month(month)
    except ValidationError as exc:
        choice.errors = list(exc.messages)
        return choice
    choice.first, choice.last = month_bounds(year, number)
    return choice


def _month_options(today: date) -> list[str]:
    options, day = [], today.replace(day=1)
    for _ in range(13):
        options.append(_month_text(day))
        day = (day - timedelta(days=1)).replace(day=1)
    return options


def report_page_context(*, user: Any, choice: PeriodChoice, report: FinanceReport) -> dict[str, Any]:
    today = fleet_today()
    previous = choice.first - timedelta(days=1)
    following = choice.last + timedelta(days=1)
    close = month_close_active(first=choice.first, last=choice.last) if choice.is_month else None
    everyone = is_finance(user) or is_fleet_admin(user)
    return {
        "choice": choice,
        "report": report,
        "totals": report.totals,
        "fleet": report.fleet,
        "today": today,
        "month_options": _month_options(today),
        "previous_month": _month_text(previous),
        "next_month": _month_text(following) if following <= today else "",
        "close": close,
        "can_close": everyone and choice.is_month and close is None and choice.last < today,
        "can_reopen": is_fleet_admin(user) and close is not None,
        "sees_everyone": everyone,
        "gpu_hours_chart": gpu_hours_by_team_figure(report.daily),
        "cost_chart": cost_by_team_figure(report.rows, report.currency),
        "share_chart": serving_training_figure(report.rows),
    }


def _require_finance_or_admin(request: HttpRequest) -> None:
    if not (is_finance(request.user) or is_fleet_admin(request.user)):
        raise Http404("No such page.")


@login_required
@require_http_methods(["GET", "POST"])
def rates(request: HttpRequest) -> HttpResponse:
    """Prices per GPU-hour with their history; admins add a price from a day on."""
    _require_finance_or_admin(request)
    form = RateForm(request.POST if request.method == "POST" else None)
    if request.method == "POST":
        if not is_fleet_admin(request.user):
            raise Http404("No such page.")
        if form.is_valid():
            try:
                rate = services.rate_set(
                    actor=request.user,
                    accelerator_type_id=form.cleaned_data["accelerator_type"].pk,
                    price_per_gpu_hour=form.cleaned_data["price_per_gpu_hour"],
                    effective_from=form.cleaned_data["effective_from"],
                )
            except ValidationError as exc:
                form.add_error(None, exc)
            else:
                messages.success(
                    request,
                    f"{rate.accelerator_type.name} costs {rate.price_per_gpu_hour} per GPU-hour "
                    f"from {rate.effective_from:%Y-%m-%d}.",
                )
                return redirect("finance:rates")
    context = {"form": form, "rates": rate_history(), "currency": settings.FINANCE_CURRENCY}
    return render(request, "finance/rates.html", context, status=400 if form.errors else 200)


@login_required
@require_http_methods(["GET", "POST"])
def budgets(request: HttpRequest) -> HttpResponse:
    _require_finance_or_admin(request)
    form = BudgetForm(request.POST if request.method == "POST" else None)
    if request.method == "POST" and form.is_valid():
        try:
            services.budget_set(
                actor=request.user,
                team_id=form.cleaned_data["team"].pk,
                unit=form.cleaned_data["unit"],
                monthly_amount=form.cleaned_data["monthly_amount"],
            )
        except ValidationError as exc:
            form.add_error(None, exc)
        else:
            messages.success(request, f"Budget for {form.cleaned_data['team'].name} saved.")
            return redirect("finance:budgets")
    month_first = fleet_today().replace(day=1)
    budgets = Budget.objects.select_related("team", "updated_by").order_by("team__name")
    spent = {status.team_id: status for status in budget_statuses(month_first=month_first)}
    context = {
        "form": form,
        "rows": [(budget, spent.get(budget.team_id)) for budget in budgets],
        "month": month_first,
        "currency": settings.FINANCE_CURRENCY,
    }
    return render(request, "finance/budgets.html", context, status=400 if form.errors else 200)


@login_required
@require_http_methods(["GET"])
def months(request: HttpRequest) -> HttpResponse:
    _require_finance_or_admin(request)
    return render(
        request,
        "finance/months.html",
        {"closes": months_closed(), "close_form": MonthForm(), "reopen_form": ReopenForm(), "today": fleet_today()},
    )


def _month_action(request: HttpRequest, form: MonthForm) -> tuple[int, int] | None:
    if not form.is_valid():
        for problems in form.errors.values():
            for problem in problems:
                messages.error(request, str(problem))
        return None
    year, number = form.cleaned_data["month"]
    return int(year), int(number)


@login_required
@require_POST
def month_close(request: HttpRequest) -> HttpResponse:
    _require_finance_or_admin(request)
    chosen = _month_action(request, MonthForm(request.POST))
    if chosen is not None:
        try:
            services.month_close(actor=request.user, year=chosen[0], month=chosen[1])
        except (ValidationError, PermissionDenied) as exc:
            messages.error(request, " ".join(getattr(exc, "messages", [str(exc)])))
        else:
            messages.success(request, f"{date(chosen[0], chosen[1], 1):%B %Y} is closed; its report no longer changes.")
            return redirect(f"/reports/usage/?month={chosen[0]:04d}-{chosen[1]:02d}")
    return redirect("finance:months")


@login_required
@require_POST
def month_reopen(request: HttpRequest) -> HttpResponse:
    if not is_fleet_admin(request.user):
        raise Http404("No such page.")
    chosen = _month_action(request, ReopenForm(request.POST))
    if chosen is not None:
        try:
            services.month_reopen(
                actor=request.user, year=chosen[0], month=chosen[1], reason=request.POST.get("reason", "")
            )
        except ValidationError as exc:
            messages.error(request, " ".join(exc.messages))
        else:
            messages.success(request, f"{date(chosen[0], chosen[1], 1):%B %Y} is open again.")
    return redirect("finance:months")


@login_required
def jobs(request: HttpRequest) -> HttpResponse:
    """Every job that held GPUs in the period, like ``sacct``; filter by team and user; CSV."""
    team_ids = report_team_ids_for(user=request.user)
    params = request.GET.copy()
    if not params.get("start") and not params.get("end"):
        first, last = month_bounds(fleet_today().year, fleet_today().month)
        params["start"], params["end"] = first.isoformat(), last.isoformat()
    form = JobFilterForm(params)
    if team_ids is not None:
        form.fields["team"].queryset = form.fields["team"].queryset.filter(pk__in=team_ids)  # type: ignore[attr-defined]
    if not form.is_valid():
        if request.GET.get("format") == "csv":
            problems = dict.fromkeys(str(m) for ms in form.errors.values() for m in ms)
            return HttpResponseBadRequest("\n".join(problems) + "\n", content_type="text/plain; charset=utf-8")
        return render(request, "finance/jobs.html", {"form": form}, status=400)
    data = form.cleaned_data
    lines = job_lines(
        user=request.user,
        first=data["start"],
        last=data["end"],
        team_id=data["team"].pk if data["team"] else None,
        username=data["user"].strip(),
    )
    if request.GET.get("format") == "csv":
        response = HttpResponse(jobs_csv(lines, settings.FINANCE_CURRENCY), content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="fleetline-jobs-{data["start"]}-{data["end"]}.csv"'
        return response
    context = {
        "form": form,
        "lines": lines[:1000],
        "more": max(0, len(lines) - 1000),
        "total_gpu_h": sum(line.gpu_h for line in lines),
        "total_lost_gpu_h": sum(line.lost_gpu_h for line in lines),
        "total_cost": sum((line.cost for line in lines), start=0),
        "currency": settings.FINANCE_CURRENCY,
        "query": params.urlencode(),
    }
    return render(request, "finance/jobs.html", context)


@login_required
def export(request: HttpRequest, pk: int) -> HttpResponse:
    """A background export's progress, and its file once built."""
    queued = get_object_or_404(ReportExport, pk=pk, requested_by_id=request.user.pk)
    if request.GET.get("download") and queued.state == ReportExport.State.DONE:
        kind = "text/csv; charset=utf-8" if queued.file_format == "csv" else XLSX
        response = HttpResponse(bytes(queued.content or b""), content_type=kind)
        name = f"fleetline-chargeback-{queued.first_day}-{queued.last_day}.{queued.file_format}"
        response["Content-Disposition"] = f'attachment; filename="{name}"'
        return response
    return render(request, "finance/export.html", {"export": queued})
