from __future__ import annotations

import re
from datetime import date, timedelta
from decimal import Decimal
from typing import Any

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


# Numbers as the pages take them: ASCII digits only. Python's int(), float() and Decimal() also
# read other scripts' digits ("٣", "３", "²" even fails half-way), which a person did not mean as
# a number and which no other part of the product would show back the same way.
_NON_ASCII_DIGIT = re.compile(r"[^\x00-\x7f]")
NOT_ASCII_NUMBER = "Enter the number with the digits 0-9."
# Ids in a query string or a form: what a database id can hold.
MAX_ID = 2**63 - 1
_ID = re.compile(r"[0-9]{1,19}")


def _ascii_number(value: Any) -> Any:
    if isinstance(value, str) and _NON_ASCII_DIGIT.search(value):
        raise forms.ValidationError(NOT_ASCII_NUMBER, code="invalid")
    return value


class AsciiIntegerField(forms.IntegerField):
    def to_python(self, value: Any) -> int | None:
        return super().to_python(_ascii_number(value))


class AsciiFloatField(forms.FloatField):
    def to_python(self, value: Any) -> float | None:  # type: ignore[override]
        return super().to_python(_ascii_number(value))


class AsciiDecimalField(forms.DecimalField):
    def to_python(self, value: Any) -> Decimal | None:  # type: ignore[override]
        return super().to_python(_ascii_number(value))


def id_from_text(text: str) -> int | None:
    """An id written in ASCII digits (``42``), or None for anything else: another script's
    digits, a sign, a number no id can be."""
    if not _ID.fullmatch(text) or int(text) > MAX_ID:
        return None
    return int(text)
