"""Usage reports for finance and fleet admins: the same selector as the usage report page."""

from __future__ import annotations

from datetime import date, datetime, time, timedelta

from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response

from api.views.base import ApiView
from scheduling.selectors import usage_report
from tenants.permissions import is_finance, is_fleet_admin

MAX_PERIOD_DAYS = 366


class UsageQuery(serializers.Serializer):
    start = serializers.DateField(help_text="First day, inclusive (YYYY-MM-DD).")
    end = serializers.DateField(help_text="Last day, inclusive (YYYY-MM-DD).")

    def validate(self, attrs: dict[str, date]) -> dict[str, date]:
        if attrs["end"] < attrs["start"]:
            raise serializers.ValidationError({"end": "The period ends before it starts."})
        if (attrs["end"] - attrs["start"]).days >= MAX_PERIOD_DAYS:
            raise serializers.ValidationError({"end": f"A report covers at most {MAX_PERIOD_DAYS} days."})
        return attrs


class UsageRowOutput(serializers.Serializer):
    team = serializers.CharField()
    department = serializers.CharField()
    accelerator = serializers.CharField()
    kind = serializers.CharField()
    allocated_gpu_h = serializers.FloatField()
    useful_gpu_h = serializers.FloatField()
    lost_gpu_h = serializers.FloatField()
    borrowed_gpu_h = serializers.FloatField()


class FleetTotalsOutput(serializers.Serializer):
    capacity_gpu_h = serializers.FloatField()
    allocated_gpu_h = serializers.FloatField()
    idle_gpu_h = serializers.FloatField()
    down_gpu_h = serializers.FloatField()
    utilisation = serializers.FloatField()


class UsageOutput(serializers.Serializer):
    start = serializers.DateField()
    end = serializers.DateField()
    rows = UsageRowOutput(many=True)
    fleet = FleetTotalsOutput()


class UsageReportView(ApiView):
    @extend_schema(parameters=[UsageQuery], responses=UsageOutput, summary="GPU-hours per team (finance, admins)")
    def get(self, request: Request) -> Response:
        if not (is_finance(request.user) or is_fleet_admin(request.user)):
            raise PermissionDenied("Usage reports are for finance and fleet admins.")
        query = UsageQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        start, end = query.validated_data["start"], query.validated_data["end"]
        zone = timezone.get_current_timezone()
        rows, totals = usage_report(
            start=datetime.combine(start, time.min, zone), end=datetime.combine(end + timedelta(days=1), time.min, zone)
        )
        return Response(UsageOutput({"start": start, "end": end, "rows": rows, "fleet": totals}).data)
