"""Usage report rows out as CSV or XLSX bytes. Plain data in; never touches the ORM."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence

from openpyxl import Workbook

from scheduling.selectors import FleetTotals, UsageRow

HEADER = (
    "team",
    "department",
    "accelerator",
    "kind",
    "allocated_gpu_h",
    "useful_gpu_h",
    "lost_gpu_h",
    "borrowed_gpu_h",
)


def _cells(row: UsageRow) -> tuple[object, ...]:
    return (
        row.team,
        row.department,
        row.accelerator,
        row.kind,
        round(row.allocated_gpu_h, 3),
        round(row.useful_gpu_h, 3),
        round(row.lost_gpu_h, 3),
        round(row.borrowed_gpu_h, 3),
    )


def _totals(totals: FleetTotals) -> list[tuple[object, ...]]:
    return [
        ("fleet capacity_gpu_h", round(totals.capacity_gpu_h, 3)),
        ("fleet allocated_gpu_h", round(totals.allocated_gpu_h, 3)),
        ("fleet idle_gpu_h", round(totals.idle_gpu_h, 3)),
        ("fleet down_gpu_h", round(totals.down_gpu_h, 3)),
        ("fleet utilisation", round(totals.utilisation, 4)),
    ]


def usage_csv(rows: Sequence[UsageRow], totals: FleetTotals) -> bytes:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(HEADER)
    writer.writerows(_cells(row) for row in rows)
    writer.writerow(())
    writer.writerows(_totals(totals))
    return out.getvalue().encode()


def usage_xlsx(rows: Sequence[UsageRow], totals: FleetTotals) -> bytes:
    book = Workbook()
    sheet = book.active
    sheet.title = "usage"
    sheet.append(HEADER)
    for row in rows:
        sheet.append(_cells(row))
    fleet = book.create_sheet("fleet")
    for line in _totals(totals):
        fleet.append(line)
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()
