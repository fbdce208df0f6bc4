"""The jobs page's rows written in Python (`scheduling.job_rows_html`) are the HTML their plain
definition, the template ``scheduling/_job_row.html``, renders: on every state a row can show,
with and without waits, estimates, limits, loans and submitters, and on text that must be escaped."""

from __future__ import annotations

import dataclasses

import pytest
from django.template.loader import render_to_string
from django.test import Client

from scheduling.estimates import job_rows_estimated
from scheduling.job_rows_html import job_rows_html
from scheduling.listed import listed_by_id
from scheduling.models import Job
from scheduling.selectors import JobRow, job_rows
from scheduling.services.jobs import fleet_now_s, job_cancel
from tests.factories import MembershipFactory, UserFactory
from tests.scheduling.conftest import Fleet

pytestmark = pytest.mark.django_db

PATH = "/jobs/"


def _plain(rows: list[JobRow], now_s: float) -> str:
    return "".join(
        render_to_string("scheduling/_job_row.html", {"row": row, "job_path": PATH, "now_s": now_s}) for row in rows
    )


def _rows(now_s: float) -> list[JobRow]:
    jobs = listed_by_id(list(Job.objects.order_by("-id").values_list("pk", flat=True)))
    return job_rows_estimated(rows=job_rows(jobs=jobs), now_s=now_s)


def _variants(rows: list[JobRow]) -> list[JobRow]:
    """Each row as it is, then with text to escape, without a submitter, borrowing and without a
    wait: states and fields the fleet above may not have reached on its own."""
    out: list[JobRow] = []
    for row in rows:
        out.append(row)
        job = row.job
        odd = dataclasses.replace(
            job,  # type: ignore[type-var]
            name='<b>"x" & y</b>',
            team_name="R&D <team>",
            submitted_by_username=None,
            borrowing=not job.borrowing,
            placement_level="rack",
        )
        out.append(JobRow(odd, None, None))
        out.append(dataclasses.replace(row, job=odd))
    return out


def test_the_rows_written_in_python_are_the_rows_the_template_renders(fleet: Fleet) -> None:
    fleet.submit(gpus=16, duration_s=600.0, time_limit_s=600.0, name="limited")
    fleet.submit(gpus=8, duration_s=7200.0, name="no-limit")
    fleet.tick()
    fleet.submit(gpus=32, name="waits-for-all", time_limit_s=3600.0)
    fleet.submit(gpus=4, name="small-wait", time_limit_s=1800.0)
    cancelled = fleet.submit(gpus=2, name="cancelled")
    job_cancel(job=cancelled, user=UserFactory())
    fleet.tick()
    for _ in range(12):  # the limited job ends, its successors start
        fleet.tick(wall_step_s=60.0)
    fleet.submit(gpus=1, name="never-ticked")
    now_s = fleet_now_s()
    rows = _variants(_rows(now_s))
    states = {row.job.state for row in rows}

    assert {"pending", "running", "completed", "cancelled"} <= states
    assert any(row.estimate for row in rows) and any(row.wait is None for row in rows)
    assert str(job_rows_html(rows, job_path=PATH, now_s=now_s)) == _plain(rows, now_s)


def test_the_jobs_page_shows_the_rows_and_says_when_there_are_none(fleet: Fleet) -> None:
    client = Client()
    client.force_login(MembershipFactory(team=fleet.team).user)
    assert "No jobs here yet." in client.get("/jobs/", secure=True).content.decode()
    fleet.submit(gpus=8, name="listed-run")
    html = client.get("/jobs/", secure=True).content.decode()
    assert 'data-state="pending"' in html and "listed-run" in html and "No jobs" not in html
