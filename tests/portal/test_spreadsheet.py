"""Spreadsheet cells: text a spreadsheet would run as a formula is neutralised; the rest is kept."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest

from core.spreadsheet import cell_safe, row_safe

HYPERLINK = '=HYPERLINK("http://evil.example","click")'


@pytest.mark.parametrize(
    ("value", "written"),
    [
        (HYPERLINK, "'" + HYPERLINK),
        ("@SUM(1+1)", "'@SUM(1+1)"),
        ("+1+1", "'+1+1"),
        ("-2+3+cmd|' /C calc'!A0", "'-2+3+cmd|' /C calc'!A0"),
        ("\t=1+1", "'\t=1+1"),
        ("\r=1+1", "'\r=1+1"),
        ("=", "'="),
        ("finetune-llm", "finetune-llm"),
        ("a=b", "a=b"),
        ("", ""),
        ("-3.00", "-3.00"),
        ("+12", "+12"),
    ],
)
def test_it_neutralises_text_that_starts_a_formula_and_keeps_the_rest(value: str, written: str) -> None:
    assert cell_safe(value) == written


@pytest.mark.parametrize("value", [-3, -2.5, Decimal("-1.25"), 0, None, date(2026, 1, 1)])
def test_it_leaves_numbers_dates_and_blanks_as_they_are(value: object) -> None:
    assert cell_safe(value) is value


def test_it_neutralises_each_cell_of_a_row() -> None:
    assert row_safe(("=1+1", -1, "name")) == ["'=1+1", -1, "name"]
