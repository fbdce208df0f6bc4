"""The chargeback report page and its exports: who sees what, the numbers, bad input."""

from __future__ import annotations

import csv
import io
from datetime import date
from decimal import Decimal

import pytest
from django.contrib.auth.models import User
from django.test import Client
from openpyxl import load_workbook

from finance.models import Budget
from scheduling.models import Job, JobUsage
from tenants.models import Team
from tests.factories import QuotaFactory, TeamFactory
from tests.finance.ledger import Books, books_build

JANUARY = {"month": "2026-01"}


@pytest.fixture
def books(db: None) -> Books:
    books = books_build()
    Budget.objects.create(team=books.vision, unit=Budget.Unit.MONEY, monthly_amount=Decimal("500"))
    return books


def _client(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _page_rows(response: object) -> list[list[object]]:
    """The table's figures as the page shows them (rounded as the template rounds them)."""
    report = response.context["report"]  # type: ignore[attr-defined]
    return [
        [row.team, round(row.used_gpu_h, 2), round(row.borrowed_gpu_h, 2), round(row.lost_gpu_h, 2), row.cost]
        for row in [*report.rows, report.totals]
    ]


def test_finance_sees_every_team_and_the_reconciliation_line(books: Books) -> None:
    response = _client(books.finance).get("/reports/usage/", JANUARY)

    assert response.status_code == 200
    assert [row.team for row in response.context["report"].rows] == ["Search", "Vision"]
    html = response.content.decode()
    assert "Reconciliation: capacity 2304.00 GPU-h = allocated 248.00 + idle 2032.00 + down 24.00" in html
    assert "fleet calendar" in html


def test_the_page_opens_on_the_current_fleet_month_without_asking(books: Books) -> None:
    # The fleet clock stands at 40 days from 2026-01-01: the 10th of February.
    response = _client(books.admin).get("/reports/usage/")

    assert response.status_code == 200
    assert response.context["choice"].month == "2026-02"
    assert response.context["report"] is not None
    assert "February 2026" in response.content.decode()


def test_a_lead_sees_only_their_own_teams_without_the_fleet_line(books: Books) -> None:
    response = _client(books.lead).get("/reports/usage/", JANUARY)

    assert response.status_code == 200
    assert [row.team for row in response.context["report"].rows] == ["Vision"]
    assert response.context["report"].fleet is None
    assert "Search" not in response.content.decode()


@pytest.mark.parametrize("who", ["member", "outsider"])
def test_members_and_outsiders_get_a_404_with_the_sites_navigation(books: Books, who: str) -> None:
    response = _client(getattr(books, who)).get("/reports/usage/", JANUARY)

    assert response.status_code == 404


@pytest.mark.parametrize("who", ["member", "outsider"])
def test_members_and_outsiders_cannot_see_the_per_job_detail(books: Books, who: str) -> None:
    assert _client(getattr(books, who)).get("/finance/jobs/").status_code == 404


def test_the_csv_export_parses_back_to_the_pages_numbers(books: Books) -> None:
    client = _client(books.finance)
    page = _page_rows(client.get("/reports/usage/", JANUARY))

    response = client.get("/reports/usage/", {**JANUARY, "format": "csv"})

    assert response["Content-Disposition"] == 'attachment; filename="fleetline-chargeback-2026-01-01-2026-01-31.csv"'
    lines = list(csv.reader(io.StringIO(response.content.decode())))
    assert lines[1] == ["Period", "2026-01-01 to 2026-01-31 (whole days, fleet calendar)"]
    assert ["Rate", "H100 from 2026-01-16", "3.0000"] in lines
    head = lines.index(next(line for line in lines if line and line[0] == "Team"))
    assert lines[head][3] == "Used (GPU-h)" and lines[head][11] == "Cost (EUR)"
    parsed = []
    for line in lines[head + 1 :]:
        if not line:
            break
        parsed.append([line[0], float(line[3]), float(line[5]), float(line[7]), Decimal(line[11])])
    assert parsed == page
    assert parsed[-1][0] == "Total"


def test_the_xlsx_export_parses_back_to_the_pages_numbers_with_formats(books: Books) -> None:
    client = _client(books.finance)
    page = _page_rows(client.get("/reports/usage/", JANUARY))

    response = client.get("/reports/usage/", {**JANUARY, "format": "xlsx"})

    sheet = load_workbook(io.BytesIO(response.content))["Chargeback"]
    values = list(sheet.iter_rows(values_only=True))
    head = next(n for n, row in enumerate(values) if row[0] == "Team")
    parsed = []
    for row in values[head + 1 :]:
        if row[0] is None:
            break
        parsed.append([row[0], row[3], row[5], row[7], Decimal(str(row[11])).quantize(Decimal("0.01"))])
    assert parsed == page
    cost_cell = sheet.cell(head + 2, 12)
    assert cost_cell.number_format == '#,##0.00 "EUR"'
    assert sheet.cell(head + 2, 4).number_format == "#,##0.00"
    assert sheet.cell(head + 2, 5).number_format == "0.0%"
    assert values[1][1] == "2026-01-01 to 2026-01-31 (whole days, fleet calendar)"


@pytest.mark.parametrize(
    "query",
    [
        {"start": "2026-02-01", "end": "2026-01-01"},
        {"start": "2020-01-01", "end": "2026-01-01"},
        {"start": "9999-12-30", "end": "9999-12-31"},
        {"month": "9999-12"},
        {"month": "2026-13"},
        {"month": "soon"},
    ],
)
@pytest.mark.parametrize("export", [None, "csv", "xlsx"])
def test_a_bad_period_is_refused_with_a_message_not_a_500(
    books: Books, query: dict[str, str], export: str | None
) -> None:
    response = _client(books.finance).get("/reports/usage/", query if export is None else {**query, "format": export})

    assert response.status_code == 400
    body = response.content.decode()
    assert any(
        message in body
        for message in (
            "The period must start on or before its end.",
            "A report covers at most one year.",
            "Reports cover days from 1970-01-01 to 9998-12-31.",
            "A month is numbered 01 to 12.",
            "A month is written YYYY-MM",
        )
    )


def test_the_last_day_reports_can_cover_is_accepted(books: Books) -> None:
    client = _client(books.finance)
    for query in ({"start": "9998-12-01", "end": "9998-12-31"}, {"month": "9998-12"}):
        assert client.get("/reports/usage/", query).status_code == 200
        assert client.get("/reports/usage/", {**query, "format": "csv"}).status_code == 200


def test_the_per_job_csv_carries_the_detail(books: Books) -> None:
    response = _client(books.finance).get(
        "/finance/jobs/", {"start": "2026-01-01", "end": "2026-01-31", "team": books.vision.pk, "format": "csv"}
    )

    lines = list(csv.reader(io.StringIO(response.content.decode())))
    assert lines[0][:4] == ["Job", "Name", "Team", "User"]
    assert sorted(line[1] for line in lines[1:]) == ["long-run", "sweep"]
    assert sum(Decimal(line[9]) for line in lines[1:]) == Decimal("376.00")


def test_a_lead_sees_their_teams_spend_against_budget_on_the_team_page(books: Books) -> None:
    # Move January's 10th into the fleet's current month, February: 80 GPU-h at 3.00.
    JobUsage.objects.filter(day=date(2026, 1, 10)).update(day=date(2026, 2, 10))

    response = _client(books.lead).get(f"/teams/{books.vision.slug}/")

    html = response.content.decode()
    assert 'id="team-budget"' in html
    assert '240.00</strong> of <span id="budget-amount">500.00</span> EUR spent (48 %)' in html


def test_a_member_sees_no_money_on_the_team_page(books: Books) -> None:
    response = _client(books.member).get(f"/teams/{books.vision.slug}/")

    assert response.status_code == 200
    assert 'id="team-budget"' not in response.content.decode()


@pytest.mark.parametrize("extra_teams", [0, 5])
def test_the_report_page_costs_a_fixed_number_of_queries(
    books: Books, django_assert_max_num_queries: object, extra_teams: int
) -> None:
    for n in range(extra_teams):
        team = TeamFactory(name=f"Extra {n}", slug=f"extra-{n}")
        QuotaFactory(team=team, accelerator_type=books.h100, guaranteed=1)
        Budget.objects.create(team=team, unit=Budget.Unit.GPU_HOURS, monthly_amount=Decimal("10"))
    client = _client(books.finance)
    client.get("/reports/usage/", JANUARY)  # the session and the cached fleet epoch

    # session, user, groups x2, fleet clock x3 (today, now, policy row), the charge model, rates x2,
    # usage by day, quotas, budgets, teams, fleet samples, allocated, the close, unread notices
    with django_assert_max_num_queries(17):  # type: ignore[operator]
        response = client.get("/reports/usage/", JANUARY)

    assert len(response.context["report"].rows) == 2 + extra_teams


def test_an_unknown_team_in_the_per_job_filter_is_refused_with_a_message(books: Books) -> None:
    client = _client(books.finance)

    page = client.get("/finance/jobs/", {"start": "2026-01-01", "end": "2026-01-31", "team": "999999"})
    download = client.get(
        "/finance/jobs/", {"start": "2026-01-01", "end": "2026-01-31", "team": "999999", "format": "csv"}
    )

    assert page.status_code == 400 and "Select a valid choice" in page.content.decode()
    assert download.status_code == 400 and "Select a valid choice" in download.content.decode()


def test_a_lead_cannot_filter_the_per_job_detail_by_another_team(books: Books) -> None:
    response = _client(books.lead).get(
        "/finance/jobs/", {"start": "2026-01-01", "end": "2026-01-31", "team": books.search.pk}
    )

    assert response.status_code == 400


HYPERLINK = '=HYPERLINK("http://evil.example","click")'
AT_SUM = "@SUM(1+1)"


def test_a_job_named_like_a_formula_is_written_as_text_in_the_per_job_csv(books: Books) -> None:
    Job.objects.filter(name="long-run").update(name=HYPERLINK)
    Job.objects.filter(name="sweep").update(name=AT_SUM)

    response = _client(books.finance).get(
        "/finance/jobs/", {"start": "2026-01-01", "end": "2026-01-31", "team": books.vision.pk, "format": "csv"}
    )

    lines = list(csv.reader(io.StringIO(response.content.decode())))
    assert sorted(line[1] for line in lines[1:]) == ["'" + HYPERLINK, "'" + AT_SUM]
    # The figures stay figures.
    assert sum(Decimal(line[9]) for line in lines[1:]) == Decimal("376.00")


def test_a_team_named_like_a_formula_is_written_as_text_in_the_report_csv_and_xlsx(books: Books) -> None:
    Team.objects.filter(pk=books.vision.pk).update(name=HYPERLINK)
    Team.objects.filter(pk=books.search.pk).update(name=AT_SUM)
    client = _client(books.finance)

    as_csv = client.get("/reports/usage/", {**JANUARY, "format": "csv"}).content.decode()
    lines = list(csv.reader(io.StringIO(as_csv)))
    names = [line[0] for line in lines if line and line[0].startswith("'")]
    assert sorted(names) == ["'" + HYPERLINK, "'" + AT_SUM]
    as_xlsx = client.get("/reports/usage/", {**JANUARY, "format": "xlsx"}).content
    sheet = load_workbook(io.BytesIO(as_xlsx))["Chargeback"]
    cells = {cell.value: cell for row in sheet.iter_rows() for cell in row if isinstance(cell.value, str)}
    for name in (HYPERLINK, AT_SUM):
        assert name not in cells
        assert cells["'" + name].data_type == "s"
    assert not any(cell.data_type == "f" for row in sheet.iter_rows() for cell in row)
