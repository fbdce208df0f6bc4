"""The exported figures: a rounding error a hair below zero is written as 0, never as "-0.0"."""

from __future__ import annotations

import csv
import io
import re
import zipfile
from datetime import date
from decimal import Decimal

from finance.exports import jobs_csv, report_csv, report_xlsx
from finance.selectors import FinanceReport, FleetLine, JobLine, TeamRow

HAIR = -1e-9  # what summing and subtracting float GPU-hours leaves where the answer is 0


def _report() -> FinanceReport:
    row = TeamRow(
        team_id=1,
        team="Vision",
        department="Research",
        guarantee_gpu_h=0.0,
        used_gpu_h=12.0,
        useful_gpu_h=12.0,
        lost_gpu_h=HAIR,
        borrowed_gpu_h=-0.001,
        serving_gpu_h=0.0,
        training_gpu_h=12.0,
        batch_gpu_h=HAIR,
        cost=Decimal("-0.00"),
    )
    fleet = FleetLine(capacity_gpu_h=24.0, allocated_gpu_h=12.0, idle_gpu_h=12.000001, down_gpu_h=0.0)
    return FinanceReport(date(2026, 1, 1), date(2026, 1, 31), "EUR", "usage", [row], fleet, [])


def test_the_report_csv_never_prints_negative_zero() -> None:
    text = report_csv(_report()).decode()

    assert "-0.0" not in text
    cells = [cell for line in csv.reader(io.StringIO(text)) for cell in line]
    assert "Unaccounted (GPU-h)" in cells


def test_the_report_xlsx_holds_no_negative_zero() -> None:
    data = report_xlsx(_report())
    with zipfile.ZipFile(io.BytesIO(data)) as book:
        sheet = book.read("xl/worksheets/sheet1.xml").decode()

    assert "<v>12</v>" in sheet  # the figures are there
    assert not re.search(r"<v>-0(\.0*)?</v>", sheet)


def test_the_per_job_csv_never_prints_negative_zero() -> None:
    line = JobLine(7, "train", "Vision", "lead", "H100", "training", 2.0, 2.0, HAIR, Decimal("3.00"))

    assert "-0.00" not in jobs_csv([line], "EUR").decode()
