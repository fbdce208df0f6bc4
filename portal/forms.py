from __future__ import annotations

from datetime import date, timedelta

from django import forms
from django.core.validators import MaxValueValidator, MinValueValidator
from django.utils import timezone

# Reports cover whole days within these bounds. Past the last one a period's end (the next
# midnight, in any time zone) would not fit in a date; before the first there is no ledger.
REPORT_FIRST_DAY = date(1970, 1, 1)
REPORT_LAST_DAY = date(9998, 12, 31)
REPORT_MAX_DAYS = 366
OUT_OF_RANGE = f"Reports cover days from {REPORT_FIRST_DAY:%Y-%m-%d} to {REPORT_LAST_DAY:%Y-%m-%d}."


def _day_field(label: str) -> forms.DateField:
    return forms.DateField(
        label=label,
        validators=[
            MinValueValidator(REPORT_FIRST_DAY, message=OUT_OF_RANGE),
            MaxValueValidator(REPORT_LAST_DAY, message=OUT_OF_RANGE),
        ],
    )


class ReportPeriodForm(forms.Form):
    start = _day_field("From (inclusive)")
    end = _day_field("To (inclusive)")

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        today = timezone.localdate()
        self.fields["start"].initial = today - timedelta(days=30)
        self.fields["end"].initial = today

    def clean(self) -> dict[str, object]:
        data = super().clean() or {}
        start, end = data.get("start"), data.get("end")
        if start and end and start > end:
            raise forms.ValidationError("The period must start on or before its end.")
        if start and end and (end - start).days > REPORT_MAX_DAYS:
            raise forms.ValidationError("A report covers at most one year.")
        return data
