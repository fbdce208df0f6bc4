"""The chargeback report out as CSV or XLSX bytes, with the same rounded figures as the page:
GPU-hours to two decimals, money to the cent, shares to a tenth of a percent. A header block
names the period, its clock, the charge model and the rates used; a totals row ends the table;
the reconciliation line follows. Every cell goes through ``core.spreadsheet.cell_safe``, so
text that a spreadsheet would run as a formula (a team or job named ``=HYPERLINK(...)``) is
written as text. Plain data in; never touches the ORM."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from decimal import Decimal
from typing import cast

from openpyxl import Workbook
from openpyxl.styles import Font
from openpyxl.utils import get_column_letter
from openpyxl.worksheet.worksheet import Worksheet

from core.spreadsheet import cell_safe, row_safe
from finance.selectors import FinanceReport, JobLine, TeamRow

GPU_H = "#,##0.00"
PERCENT = "0.0%"
# Lost GPU-hours by why, after the table's other columns (``finance.selectors``: the definitions).
LOST_HEADERS = (
    "Lost to restore (GPU-h)",
    "Lost to topology slowdown (GPU-h)",
    "Rolled back by evictions (GPU-h)",
    "Rolled back by failures (GPU-h)",
    "Lost, not split (GPU-h)",
)


def lost_cells(row: TeamRow | JobLine) -> list[float]:
    """Lost split by why, rounded as the page shows it."""
    return [
        figure(row.lost_restore_gpu_h),
        figure(row.lost_topology_gpu_h),
        figure(row.lost_evicted_gpu_h),
        figure(row.lost_failed_gpu_h),
        figure(row.lost_unsplit_gpu_h),
    ]


def headers(currency: str) -> tuple[str, ...]:
    return (
        "Team",
        "Department",
        "Guarantee (GPU-h)",
        "Used (GPU-h)",
        "Utilisation of guarantee",
        "Borrowed (GPU-h)",
        "Useful (GPU-h)",
        "Lost (GPU-h)",
        "Serving (GPU-h)",
        "Training (GPU-h)",
        "Batch (GPU-h)",
        f"Cost ({currency})",
        "Budget",
        "Budget unit",
        "Budget used",
        *LOST_HEADERS,
    )


def figure(value: float, places: int = 2) -> float:
    """A figure rounded to ``places``, never negative zero: a rounding error a hair below zero
    (-0.001 GPU-h) would otherwise print as "-0.0" in the file."""
    return round(value, places) + 0.0


def money(value: Decimal) -> Decimal:
    """An amount as it is, but a zero is never negative ("-0.00")."""
    return abs(value) if value.is_zero() else value


def _share(value: float | None) -> float | None:
    return None if value is None else figure(value, 3)


def cells(row: TeamRow, currency: str) -> list[object]:
    """One team's figures, rounded as the page shows them."""
    unit = {"money": currency, "gpu_h": "GPU-h", "total": f"{currency} (money budgets)"}.get(row.budget_unit, "")
    return [
        row.team,
        row.department,
        figure(row.guarantee_gpu_h),
        figure(row.used_gpu_h),
        _share(row.utilisation),
        figure(row.borrowed_gpu_h),
        figure(row.useful_gpu_h),
        figure(row.lost_gpu_h),
        figure(row.serving_gpu_h),
        figure(row.training_gpu_h),
        figure(row.batch_gpu_h),
        money(row.cost),
        row.budget,
        unit,
        _share(row.budget_used),
        *lost_cells(row),
    ]


def header_block(report: FinanceReport) -> list[list[object]]:
    lines: list[list[object]] = [
        ["Fleetline chargeback report"],
        ["Period", f"{report.first:%Y-%m-%d} to {report.last:%Y-%m-%d} (whole days, fleet calendar)"],
        ["Charge model", report.charge_model_label],
        ["Currency", report.currency],
    ]
    if report.closed:
        lines.append(["Closed", f"{report.closed.closed_at} by {report.closed.closed_by}"])
    for rate in report.rates:
        lines.append(["Rate", f"{rate.accelerator} from {rate.effective_from:%Y-%m-%d}", rate.price_per_gpu_hour])
    if not report.rates:
        lines.append(["Rate", "no rates set: costs are zero"])
    return lines


def reconciliation(report: FinanceReport) -> list[list[object]]:
    if report.fleet is None:
        return []
    f = report.fleet
    return [
        ["Fleet capacity (GPU-h)", figure(f.capacity_gpu_h)],
        ["Allocated (GPU-h)", figure(f.allocated_gpu_h)],
        ["Idle (GPU-h)", figure(f.idle_gpu_h)],
        ["Down (GPU-h)", figure(f.down_gpu_h)],
        ["Unaccounted (GPU-h)", figure(f.unaccounted_gpu_h)],
    ]


def _text(value: object) -> object:
    return "" if value is None else str(value) if isinstance(value, Decimal) else cell_safe(value)


def report_csv(report: FinanceReport) -> bytes:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerows(row_safe(line) for line in header_block(report))
    writer.writerow(())
    writer.writerow(row_safe(headers(report.currency)))
    for row in [*report.rows, report.totals]:
        writer.writerow([_text(cell) for cell in cells(row, report.currency)])
    writer.writerow(())
    writer.writerows(row_safe(line) for line in reconciliation(report))
    return out.getvalue().encode()


def _money_format(currency: str) -> str:
    return f'#,##0.00 "{currency}"'


def report_xlsx(report: FinanceReport) -> bytes:
    book = Workbook()
    # A new workbook opens on one blank worksheet; `active` is typed for every kind of book.
    sheet = cast(Worksheet, book.active)
    sheet.title = "Chargeback"
    for line in header_block(report):
        sheet.append(row_safe(line))
        if line[0] == "Rate" and len(line) > 2:
            sheet.cell(sheet.max_row, 3).number_format = f'#,##0.0000 "{report.currency}/GPU-h"'
    sheet["A1"].font = Font(bold=True, size=13)
    sheet.append([])
    head_at = sheet.max_row + 1
    sheet.append(row_safe(headers(report.currency)))
    for cell in sheet[head_at]:
        cell.font = Font(bold=True)
    for row in [*report.rows, report.totals]:
        sheet.append(row_safe(cells(row, report.currency)))
    money, last = _money_format(report.currency), sheet.max_row
    for number in range(head_at + 1, last + 1):
        for column in (3, 4, 6, 7, 8, 9, 10, 11, *range(16, 16 + len(LOST_HEADERS))):
            sheet.cell(number, column).number_format = GPU_H
        for column in (5, 15):
            sheet.cell(number, column).number_format = PERCENT
        sheet.cell(number, 12).number_format = money
        sheet.cell(number, 13).number_format = "#,##0.00"
    for cell in sheet[last]:
        cell.font = Font(bold=True)
    sheet.append([])
    for line in reconciliation(report):
        sheet.append(row_safe(line))
        sheet.cell(sheet.max_row, 2).number_format = GPU_H
    for column in range(1, 16 + len(LOST_HEADERS)):
        sheet.column_dimensions[get_column_letter(column)].width = 30 if column <= 2 else 16
    sheet.freeze_panes = sheet.cell(head_at + 1, 2).coordinate
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


JOB_HEADERS = ("Job", "Name", "Team", "User", "Accelerator", "Kind", "GPU-h", "Useful GPU-h", "Lost GPU-h")


def jobs_csv(lines: Sequence[JobLine], currency: str) -> bytes:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow((*JOB_HEADERS, f"Cost at usage rates ({currency})", *LOST_HEADERS))
    for line in lines:
        writer.writerow(
            row_safe(
                (
                    line.job_id,
                    line.name,
                    line.team,
                    line.user,
                    line.accelerator,
                    line.kind,
                    f"{figure(line.gpu_h):.2f}",
                    f"{figure(line.useful_gpu_h):.2f}",
                    f"{figure(line.lost_gpu_h):.2f}",
                    money(line.cost),
                    *(f"{value:.2f}" for value in lost_cells(line)),
                )
            )
        )
    return out.getvalue().encode()
