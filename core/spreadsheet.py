"""Cells for spreadsheets (CSV and XLSX exports), safe to open: text that a spreadsheet would read
as a formula is neutralised as OWASP recommends ("CSV Injection"), so a job or team named
``=HYPERLINK(...)`` by one user cannot run in the spreadsheet of whoever opens the export.

Every export writes each cell through ``cell_safe``: user text (names, notes, reasons) needs it,
and routing every cell keeps a column added later from slipping past."""

from __future__ import annotations

import re
from collections.abc import Iterable

# What makes a spreadsheet read a cell as a formula (OWASP): =, +, - and @, and a leading tab or
# carriage return, which some spreadsheets skip before looking at the rest.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
# A plain decimal number ("-3.00") is data, not a formula: a figure written as text stays a figure.
_NUMBER = re.compile(r"[-+]?\d+(\.\d+)?")


def cell_safe(value: object) -> object:
    """``value`` as a spreadsheet cell: text that could start a formula gets a leading single quote,
    which spreadsheets show as text; numbers, dates, None and other text are unchanged."""
    if not isinstance(value, str) or not value.startswith(FORMULA_STARTS) or _NUMBER.fullmatch(value):
        return value
    return "'" + value


def row_safe(values: Iterable[object]) -> list[object]:
    """Each cell of a row through ``cell_safe``."""
    return [cell_safe(value) for value in values]
