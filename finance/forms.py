from __future__ import annotations

import re
from datetime import date
from decimal import Decimal

from django import forms

from core.forms import OUT_OF_RANGE, REPORT_FIRST_DAY, REPORT_LAST_DAY, AsciiDecimalField, ReportPeriodForm
from finance.models import Budget
from fleet.models import AcceleratorType
from tenants.models import Team

MONTH = re.compile(r"^(\d{4})-(\d{2})$")


def parse_month(value: str) -> tuple[int, int]:
    """``2026-03`` -> (2026, 3), or a ValidationError that says what is wrong."""
    match = MONTH.match(value.strip())
    if not match:
        raise forms.ValidationError("A month is written YYYY-MM, e.g. 2026-03.")
    year, month = int(match[1]), int(match[2])
    if not 1 <= month <= 12:
        raise forms.ValidationError("A month is numbered 01 to 12.")
    if not REPORT_FIRST_DAY.year <= year <= REPORT_LAST_DAY.year:
        raise forms.ValidationError(OUT_OF_RANGE)
    return year, month


class MonthForm(forms.Form):
    month = forms.CharField(label="Month", max_length=7)

    def clean_month(self) -> tuple[int, int]:
        return parse_month(self.cleaned_data["month"])


class ReopenForm(MonthForm):
    reason = forms.CharField(label="Reason", max_length=500, widget=forms.Textarea(attrs={"rows": 2}))


class RateForm(forms.Form):
    accelerator_type = forms.ModelChoiceField(queryset=AcceleratorType.objects.order_by("name"))
    price_per_gpu_hour = AsciiDecimalField(label="Price per GPU-hour", max_digits=10, decimal_places=4)
    effective_from = forms.DateField(
        label="Effective from (fleet calendar)",
        widget=forms.DateInput(attrs={"type": "date"}),
    )

    def clean_price_per_gpu_hour(self) -> Decimal:
        price = self.cleaned_data["price_per_gpu_hour"]
        if price < 0:
            raise forms.ValidationError("A rate cannot be negative.")
        return price

    def clean_effective_from(self) -> date:
        day = self.cleaned_data["effective_from"]
        if not REPORT_FIRST_DAY <= day <= REPORT_LAST_DAY:
            raise forms.ValidationError(OUT_OF_RANGE)
        return day


class BudgetForm(forms.Form):
    team = forms.ModelChoiceField(queryset=Team.objects.order_by("name"))
    unit = forms.ChoiceField(choices=Budget.Unit.choices)
    monthly_amount = AsciiDecimalField(label="Monthly amount", max_digits=14, decimal_places=2)

    def clean_monthly_amount(self) -> Decimal:
        amount = self.cleaned_data["monthly_amount"]
        if amount < 0:
            raise forms.ValidationError("A budget cannot be negative.")
        return amount


class JobFilterForm(ReportPeriodForm):
    team = forms.ModelChoiceField(queryset=Team.objects.order_by("name"), required=False)
    user = forms.CharField(label="User", max_length=150, required=False)


__all__ = ["BudgetForm", "JobFilterForm", "MonthForm", "RateForm", "ReopenForm", "parse_month"]
