"""Usage and chargeback reports: the finance report the report page and its exports show
(``finance.selectors.finance_report``), with the same rule on who sees what."""

from __future__ import annotations

from datetime import date

from django.core.validators import MaxValueValidator, MinValueValidator
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from api.views.base import ApiView
from core.forms import OUT_OF_RANGE, REPORT_FIRST_DAY, REPORT_LAST_DAY
from finance.selectors import finance_report, report_team_ids_for

MAX_PERIOD_DAYS = 366


def _day(help_text: str) -> serializers.DateField:
    """A report's day, within the days the report page takes too (a period's end past the last
    one would not fit in a date)."""
    return serializers.DateField(
        help_text=help_text,
        validators=[
            MinValueValidator(REPORT_FIRST_DAY, message=OUT_OF_RANGE),
            MaxValueValidator(REPORT_LAST_DAY, message=OUT_OF_RANGE),
        ],
    )


class UsageQuery(serializers.Serializer):
    start = _day("First fleet calendar day, inclusive (YYYY-MM-DD).")
    end = _day("Last fleet calendar day, inclusive (YYYY-MM-DD).")

    def validate(self, attrs: dict[str, date]) -> dict[str, date]:
        if attrs["end"] < attrs["start"]:
            raise serializers.ValidationError({"end": "The period ends before it starts."})
        if (attrs["end"] - attrs["start"]).days >= MAX_PERIOD_DAYS:
            raise serializers.ValidationError({"end": f"A report covers at most {MAX_PERIOD_DAYS} days."})
        return attrs


def _money() -> serializers.DecimalField:
    return serializers.DecimalField(max_digits=None, decimal_places=None, help_text="In the report's currency.")


class TeamRowOutput(serializers.Serializer):
    team = serializers.CharField()
    department = serializers.CharField()
    guarantee_gpu_h = serializers.FloatField()
    used_gpu_h = serializers.FloatField()
    useful_gpu_h = serializers.FloatField()
    lost_gpu_h = serializers.FloatField()
    borrowed_gpu_h = serializers.FloatField()
    serving_gpu_h = serializers.FloatField()
    training_gpu_h = serializers.FloatField()
    batch_gpu_h = serializers.FloatField()
    lost_restore_gpu_h = serializers.FloatField(help_text="Lost: GPUs held before the work resumed (restore).")
    lost_topology_gpu_h = serializers.FloatField(help_text="Lost: the slowdown of a spread placement.")
    lost_evicted_gpu_h = serializers.FloatField(help_text="Lost: work rolled back by evictions (preemption, drain).")
    lost_failed_gpu_h = serializers.FloatField(help_text="Lost: work rolled back by hardware failures.")
    lost_unsplit_gpu_h = serializers.FloatField(help_text="Lost recorded before the split: lost minus the four parts.")
    cost = _money()
    budget = serializers.DecimalField(max_digits=None, decimal_places=None, allow_null=True)


class FleetLineOutput(serializers.Serializer):
    capacity_gpu_h = serializers.FloatField()
    allocated_gpu_h = serializers.FloatField()
    idle_gpu_h = serializers.FloatField()
    down_gpu_h = serializers.FloatField()
    utilisation = serializers.FloatField()


class RateOutput(serializers.Serializer):
    accelerator = serializers.CharField()
    price_per_gpu_hour = _money()
    effective_from = serializers.DateField()


class UsageOutput(serializers.Serializer):
    start = serializers.DateField(source="first")
    end = serializers.DateField(source="last")
    currency = serializers.CharField()
    charge_model = serializers.CharField()
    closed = serializers.BooleanField(help_text="A closed month: figures as they were when it was closed.")
    rows = TeamRowOutput(many=True)
    fleet = FleetLineOutput(allow_null=True, help_text="Fleet totals: for finance and fleet admins only.")
    rates = RateOutput(many=True)


class UsageReportView(ApiView):
    @extend_schema(
        parameters=[UsageQuery],
        responses=UsageOutput,
        summary="GPU-hours and cost per team (finance and fleet admins: every team; leads: their own)",
    )
    def get(self, request: Request) -> Response:
        report_team_ids_for(user=request.user)  # who may see no report gets 404 before any check
        query = UsageQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        report = finance_report(
            user=request.user, first=query.validated_data["start"], last=query.validated_data["end"]
        )
        body = {
            "first": report.first,
            "last": report.last,
            "currency": report.currency,
            "charge_model": report.charge_model,
            "closed": report.closed is not None,
            "rows": report.rows,
            "fleet": report.fleet,
            "rates": report.rates,
        }
        return Response(UsageOutput(body).data)
