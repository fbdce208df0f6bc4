"""Finance's utilisation and chargeback report: who may see it, the numbers, the exports."""

from __future__ import annotations

import csv
import io

import pytest
from django.contrib.auth.models import Group
from django.test import Client
from openpyxl import load_workbook

from tenants.roles import FINANCE, FLEET_ADMIN
from tests.factories import MembershipFactory, UserFactory
from tests.scheduling.conftest import Fleet

PERIOD = {"start": "2025-12-01", "end": "2026-01-31"}  # the test fleet's clock runs from 2026-01-01


def _client_in(group: str | None, fleet: Fleet) -> Client:
    user = MembershipFactory(team=fleet.team).user if group is None else UserFactory()
    if group:
        user.groups.add(Group.objects.get_or_create(name=group)[0])
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def used(fleet: Fleet) -> Fleet:
    fleet.submit(gpus=8)
    fleet.tick()  # starts it
    fleet.tick()  # 60 fleet seconds on 8 GPUs
    return fleet


def test_finance_sees_each_teams_gpu_hours_and_the_fleet_utilisation(used: Fleet) -> None:
    response = _client_in(FINANCE, used).get("/reports/usage/", PERIOD)

    assert response.status_code == 200
    (row,) = response.context["rows"]
    assert (row.team, row.accelerator, row.kind) == ("Language Models", "H100", "training")
    assert row.allocated_gpu_h == pytest.approx(8 * 60 / 3600)
    totals = response.context["totals"]
    assert totals.capacity_gpu_h == pytest.approx(32 * 120 / 3600)


def test_the_csv_export_carries_the_same_numbers(used: Fleet) -> None:
    response = _client_in(FLEET_ADMIN, used).get("/reports/usage/", {**PERIOD, "format": "csv"})

    assert response["Content-Disposition"] == 'attachment; filename="fleetline-usage-2025-12-01-2026-01-31.csv"'
    lines = list(csv.reader(io.StringIO(response.content.decode())))
    assert lines[0][:5] == ["team", "department", "accelerator", "kind", "allocated_gpu_h"]
    assert float(lines[1][4]) == pytest.approx(0.133, abs=0.001)


def test_the_xlsx_export_opens_as_a_workbook(used: Fleet) -> None:
    response = _client_in(FINANCE, used).get("/reports/usage/", {**PERIOD, "format": "xlsx"})

    book = load_workbook(io.BytesIO(response.content))
    assert book.sheetnames == ["usage", "fleet"]
    assert book["usage"]["A2"].value == "Language Models"


@pytest.mark.parametrize(
    "period", [{"start": "2026-02-01", "end": "2026-01-01"}, {"start": "soon", "end": "2026-01-01"}]
)
def test_a_bad_period_is_refused_with_a_message(used: Fleet, period: dict[str, str]) -> None:
    response = _client_in(FINANCE, used).get("/reports/usage/", period)

    assert response.status_code == 400
    assert response.context["form"].errors


def test_team_members_cannot_open_reports(used: Fleet) -> None:
    assert _client_in(None, used).get("/reports/usage/", PERIOD).status_code == 404


@pytest.mark.parametrize("export", [None, "csv", "xlsx"])
@pytest.mark.parametrize(
    "period", [{"start": "9999-12-30", "end": "9999-12-31"}, {"start": "0001-01-01", "end": "0001-01-02"}]
)
def test_a_period_at_the_ends_of_the_calendar_is_refused_with_a_message_not_a_500(
    used: Fleet, period: dict[str, str], export: str | None
) -> None:
    query = period if export is None else {**period, "format": export}

    response = _client_in(FINANCE, used).get("/reports/usage/", query)

    assert response.status_code == 400
    assert "Reports cover days from 1970-01-01 to 9998-12-31." in response.content.decode()


def test_the_last_day_reports_can_cover_is_accepted(used: Fleet) -> None:
    period = {"start": "9998-12-01", "end": "9998-12-31"}

    for export in ("csv", "xlsx"):
        assert _client_in(FINANCE, used).get("/reports/usage/", {**period, "format": export}).status_code == 200
    assert _client_in(FINANCE, used).get("/reports/usage/", period).status_code == 200
