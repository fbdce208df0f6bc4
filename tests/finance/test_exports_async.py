"""Long periods are exported by a worker on the reports queue, with progress and a download."""

from __future__ import annotations

import csv
import io

import pytest
from django.test import Client, TestCase

from finance.models import ReportExport
from finance.services import report_export_build
from portal.celery import app
from tests.finance.ledger import Books, books_build

YEAR = {"start": "2025-07-01", "end": "2026-06-30"}


@pytest.fixture
def books(db: None) -> Books:
    return books_build()


def test_a_long_period_is_queued_on_the_reports_queue_and_downloaded_when_built(books: Books) -> None:
    client = Client()
    client.force_login(books.finance)

    with TestCase.captureOnCommitCallbacks(execute=False) as queued:
        response = client.get("/reports/usage/", {**YEAR, "format": "csv"})

    export = ReportExport.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/finance/exports/{export.pk}/"
    assert len(queued) == 1
    assert app.amqp.router.route({}, "finance.tasks.report_export_build")["queue"].name == "reports"
    assert "Queued" in client.get(response["Location"]).content.decode()

    report_export_build(export_id=export.pk)  # what the worker runs
    assert report_export_build(export_id=export.pk) is None  # a redelivered task builds nothing twice

    page = client.get(response["Location"]).content.decode()
    assert "Download the file" in page
    download = client.get(response["Location"], {"download": "1"})
    lines = list(csv.reader(io.StringIO(download.content.decode())))
    assert lines[1] == ["Period", "2025-07-01 to 2026-06-30 (whole days, fleet calendar)"]
    assert ["Total"] == [line[0] for line in lines if line and line[0] == "Total"]


def test_someone_elses_export_is_not_found(books: Books) -> None:
    export = ReportExport.objects.create(
        requested_by=books.finance, first_day="2025-07-01", last_day="2026-06-30", file_format="csv"
    )
    client = Client()
    client.force_login(books.admin)

    assert client.get(f"/finance/exports/{export.pk}/").status_code == 404


def test_a_lead_cannot_queue_a_long_export(books: Books) -> None:
    client = Client()
    client.force_login(books.lead)

    assert client.get("/reports/usage/", {**YEAR, "format": "xlsx"}).status_code == 400
    assert not ReportExport.objects.exists()
