"""The report's figures on a small ledger computed by hand (tests/finance/ledger.py)."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest

from finance.models import Budget
from finance.selectors import finance_report_build, job_lines
from tenants.models import FleetPolicy
from tests.finance.ledger import Books, books_build

JANUARY = {"first": date(2026, 1, 1), "last": date(2026, 1, 31)}


@pytest.fixture
def books(db: None) -> Books:
    return books_build()


def _rows(books: Books, **period: date) -> dict[str, object]:
    report = finance_report_build(**(period or JANUARY))
    return {row.team: row for row in report.rows}


def test_usage_pricing_charges_each_day_at_the_rate_in_force_that_day(books: Books) -> None:
    rows = _rows(books)

    vision = rows["Vision"]
    # 80 GPU-h on the 10th at 2.00, then 40 + 32 GPU-h on the 20th at 3.00.
    assert vision.used_gpu_h == pytest.approx(152.0)
    assert vision.cost == Decimal("376.00")
    # 96 GPU-h of A100 at 1.50.
    assert rows["Search"].cost == Decimal("144.00")


def test_useful_and_lost_split_the_preemption_and_the_failure(books: Books) -> None:
    vision = _rows(books)["Vision"]

    assert vision.lost_gpu_h == pytest.approx(12.0)  # 8 rolled back by the preemption, 4 by the failure
    assert vision.useful_gpu_h + vision.lost_gpu_h == pytest.approx(vision.used_gpu_h)
    assert vision.borrowed_gpu_h == pytest.approx(16.0)
    # 8 GPUs x 744 h of January; 136 of the 152 GPU-h used ran within it.
    assert vision.guarantee_gpu_h == pytest.approx(5952.0)
    assert vision.utilisation == pytest.approx(136.0 / 5952.0)


def test_guarantee_pricing_bills_the_reserved_gpus_whether_used_or_not_plus_what_was_borrowed(books: Books) -> None:
    FleetPolicy.objects.filter(pk=1).update(charge_model=FleetPolicy.ChargeModel.GUARANTEE)

    rows = _rows(books)

    # 8 GPUs x 24 h x 15 days at 2.00 + 8 x 24 x 16 days at 3.00 + 16 borrowed GPU-h at 3.00.
    assert rows["Vision"].cost == Decimal("5760.00") + Decimal("9216.00") + Decimal("48.00")
    # No guarantee: all 96 GPU-h were borrowed, at 1.50.
    assert rows["Search"].cost == Decimal("144.00")


def test_the_fleet_reconciles_and_the_totals_are_the_sums_of_the_rows(books: Books) -> None:
    report = finance_report_build(**JANUARY)

    assert report.fleet is not None
    assert report.fleet.capacity_gpu_h == pytest.approx(3 * 32 * 24)
    assert report.fleet.allocated_gpu_h == pytest.approx(152.0 + 96.0)
    assert report.fleet.down_gpu_h == pytest.approx(24.0)
    assert report.fleet.unaccounted_gpu_h == pytest.approx(0.0, abs=1e-9)
    assert report.totals.cost == Decimal("520.00")
    assert report.totals.used_gpu_h == pytest.approx(248.0)


def test_a_rate_change_mid_month_splits_a_period_at_the_day_it_starts(books: Books) -> None:
    first_half = _rows(books, first=date(2026, 1, 1), last=date(2026, 1, 15))
    second_half = _rows(books, first=date(2026, 1, 16), last=date(2026, 1, 31))

    assert first_half["Vision"].cost == Decimal("160.00")
    assert second_half["Vision"].cost == Decimal("216.00")
    report = finance_report_build(**JANUARY)
    assert [(r.accelerator, r.price_per_gpu_hour, r.effective_from) for r in report.rates] == [
        ("A100", Decimal("1.5000"), date(2025, 12, 1)),
        ("H100", Decimal("2.0000"), date(2026, 1, 1)),
        ("H100", Decimal("3.0000"), date(2026, 1, 16)),
    ]


def test_budgets_are_measured_in_money_or_in_gpu_hours(books: Books) -> None:
    Budget.objects.create(team=books.vision, unit=Budget.Unit.MONEY, monthly_amount=Decimal("500"))
    Budget.objects.create(team=books.search, unit=Budget.Unit.GPU_HOURS, monthly_amount=Decimal("100"))

    rows = _rows(books)

    assert rows["Vision"].budget_used == pytest.approx(376 / 500)
    assert rows["Search"].budget_used == pytest.approx(96 / 100)
    # Half of January carries half of the month's budget.
    half = _rows(books, first=date(2026, 1, 1), last=date(2026, 1, 15))
    assert half["Vision"].budget == Decimal("241.94")  # 500 x 15 / 31


def test_the_per_job_detail_sums_to_the_team_rows(books: Books) -> None:
    lines = job_lines(user=books.finance, **{"first": JANUARY["first"], "last": JANUARY["last"]})

    by_name = {line.name: line for line in lines}
    assert by_name["long-run"].gpu_h == pytest.approx(120.0)
    assert by_name["long-run"].lost_gpu_h == pytest.approx(8.0)
    assert by_name["long-run"].cost == Decimal("280.00")
    assert by_name["sweep"].user == "max"
    rows = _rows(books)
    for team, row in rows.items():
        assert sum(line.gpu_h for line in lines if line.team == team) == pytest.approx(row.used_gpu_h)
        assert sum(line.cost for line in lines if line.team == team) == row.cost


def test_the_per_job_detail_filters_by_team_and_user(books: Books) -> None:
    january = {"first": JANUARY["first"], "last": JANUARY["last"]}

    assert [line.name for line in job_lines(user=books.finance, team_id=books.search.pk, **january)] == ["api"]
    assert [line.name for line in job_lines(user=books.finance, username="max", **january)] == ["sweep"]
    assert {line.team for line in job_lines(user=books.lead, **january)} == {"Vision"}
