"""Finance closes a month and downloads its XLSX; a lead sees their team's spend against budget."""

from __future__ import annotations

import io
import os
from decimal import Decimal
from pathlib import Path

import pytest
from openpyxl import load_workbook
from playwright.sync_api import Page, expect

from finance.models import Budget, MonthClose
from scheduling.models import JobUsage
from tests.browser.journeys import log_in_to
from tests.finance.ledger import books_build

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_finance_closes_a_month_and_downloads_its_xlsx(asgi_server: str, page: Page) -> None:
    books = books_build()
    Budget.objects.create(team=books.vision, unit=Budget.Unit.MONEY, monthly_amount=Decimal("500"))

    log_in_to(page, asgi_server, books.finance.username, "/reports/usage/?month=2026-01")
    expect(page.locator("#report-table tfoot")).to_contain_text("520.00")
    expect(page.locator("#reconciliation")).to_contain_text("unaccounted 0.00 GPU-h")
    expect(page.locator("#gpu-hours-chart .main-svg").first).to_be_visible()
    page.click("#close-month")
    expect(page.locator("#closed-note")).to_contain_text("these figures are the month as closed")
    assert MonthClose.objects.filter(reopened_at__isnull=True).count() == 1
    screenshots = os.environ.get("FLEETLINE_SCREENSHOT_DIR")
    if screenshots:
        expect(page.locator("#share-chart .main-svg").first).to_be_visible()
        page.screenshot(path=str(Path(screenshots) / "report.png"), full_page=True)

    with page.expect_download() as download_info:
        page.click("#download-xlsx")
    download = download_info.value
    assert download.suggested_filename == "fleetline-chargeback-2026-01-01-2026-01-31.xlsx"
    sheet = load_workbook(io.BytesIO(Path(download.path()).read_bytes()))["Chargeback"]
    rows = list(sheet.iter_rows(values_only=True))
    totals = next(row for row in rows if row[0] == "Total")
    assert (totals[3], round(Decimal(str(totals[11])), 2)) == (248.0, Decimal("520.00"))
    assert any(row[0] == "Closed" for row in rows)


def test_a_lead_sees_their_teams_spend_against_budget(asgi_server: str, page: Page) -> None:
    books = books_build()
    Budget.objects.create(team=books.vision, unit=Budget.Unit.MONEY, monthly_amount=Decimal("500"))
    JobUsage.objects.filter(job=books.jobs[0], day="2026-01-10").update(day="2026-02-03")  # 80 GPU-h at 3.00

    log_in_to(page, asgi_server, books.lead.username, f"/teams/{books.vision.slug}/")
    budget = page.locator("#team-budget")
    expect(budget).to_contain_text("240.00 of 500.00 EUR spent (48 %)")
    budget.get_by_role("link", name="Chargeback report").click()
    expect(page.locator("#report-table tbody tr")).to_have_count(1)
    expect(page.locator("#report-table tbody tr[data-team=Vision] .budget-used")).to_have_text("0.480")
