"""Lost GPU-time split by why, on a scenario the real cycle runs and whose figures are computed by
hand: a 24-GPU gang spread over the pod (topology penalty 1.25 there, so a fifth of its working
time is lost to the spread), preempted by serving work, restarted from its checkpoint, then caught
by a node failure."""

from __future__ import annotations

import csv
import io
import re
from datetime import date

import pytest
from django.contrib.auth.models import Group, User
from django.db.models import Sum
from django.test import Client
from openpyxl import load_workbook

from finance.selectors import FinanceReport, finance_report_build, job_lines
from scheduling.cycle.failures import node_kill
from scheduling.models import Job, JobUsage, Node, SchedulerEvent, UsageSample
from tenants.models import FleetPolicy
from tenants.roles import FINANCE
from tests.factories import UserFactory
from tests.finance.ledger import books_build
from tests.scheduling.conftest import Fleet

PARTS = ("lost_restore_gpu_s", "lost_topology_gpu_s", "lost_evicted_gpu_s", "lost_failed_gpu_s")
FIGURES = ("allocated_gpu_s", "useful_gpu_s", "lost_gpu_s", *PARTS)


def _scenario(fleet: Fleet) -> None:
    """One-minute ticks from fleet time 0. The gang starts at 60 s; serving work arrives at 1200 s
    and takes its GPUs at 1260 s; it runs again from 1920 s; its first node dies at 2400 s (the
    gang is evicted at the next tick, 2460 s) and it starts again at 2520 s; the ledger ends at
    3000 s."""
    FleetPolicy.objects.update(topology_penalty_pod=1.25)
    gang = fleet.submit(gpus=24, duration_s=10 * 3600.0, checkpoint_interval_s=600.0, checkpoint_gb=600.0, name="gang")
    for _ in range(20):
        fleet.tick()
    fleet.submit(gpus=16, kind="serving", priority_class_id=fleet.serving.pk, name="api", duration_s=600.0)
    for _ in range(20):
        fleet.tick()
    node = Node.objects.filter(allocations__job=gang).order_by("name").first()
    assert node is not None
    node_kill(node=node, sim_now_s=2400.0)
    for _ in range(10):
        fleet.tick()


def _job(name: str) -> dict[str, float]:
    return JobUsage.objects.filter(job__name=name).aggregate(**{f: Sum(f) for f in FIGURES})


def test_lost_splits_into_restore_topology_and_work_rolled_back_by_evictions_and_by_failures(fleet: Fleet) -> None:
    _scenario(fleet)
    events = list(SchedulerEvent.objects.filter(job__name="gang").order_by("id").values_list("sim_time_s", "message"))
    assert [(t, m.split(",")[0]) for t, m in events if "Evicted" in m or "Preempted" in m] == [
        (1260.0, f"Preempted by job {Job.objects.get(name='api').pk}"),
        (2460.0, "Evicted by node failure on node pod-a-r1-n1"),
    ]
    assert sum("restoring checkpoint for 16 s" in m for _, m in events) == 2

    gang = _job("gang")
    # Held 24 GPUs for 1200 s, then 540 s, then 480 s.
    assert gang["allocated_gpu_s"] == pytest.approx(24 * (1200 + 540 + 480))
    # Two restarts read the checkpoint back for 16 s each.
    assert gang["lost_restore_gpu_s"] == pytest.approx(24 * 16 * 2)
    # A fifth of the working time: 1200 s, 540 - 16 s and 480 - 16 s.
    assert gang["lost_topology_gpu_s"] == pytest.approx(24 * (1200 + 524 + 464) * 0.2)
    # Preempted at 960 s of work (1200 s at 1/1.25), back to its checkpoint at 600 s.
    assert gang["lost_evicted_gpu_s"] == pytest.approx(24 * (960 - 600))
    # Stalled when its node died, at 600 + 464 / 1.25 s of work, back to 600 s.
    assert gang["lost_failed_gpu_s"] == pytest.approx(24 * 464 / 1.25)
    assert gang["lost_gpu_s"] == pytest.approx(sum(gang[part] for part in PARTS))
    assert gang["useful_gpu_s"] + gang["lost_gpu_s"] == pytest.approx(gang["allocated_gpu_s"])

    api = _job("api")
    # The serving job waited 60 s for the preempted gang's GPUs before it computed: restore time.
    assert api["lost_restore_gpu_s"] == pytest.approx(16 * 60)
    assert api["lost_gpu_s"] == pytest.approx(16 * 60)


def test_every_ledger_row_splits_its_lost_exactly(fleet: Fleet) -> None:
    _scenario(fleet)

    rows = [*UsageSample.objects.values(*FIGURES), *JobUsage.objects.values(*FIGURES)]
    assert rows
    for row in rows:
        assert row["lost_gpu_s"] == pytest.approx(sum(row[part] for part in PARTS), abs=1e-6)
        assert min(row[part] for part in PARTS) >= -1e-9
    per_team = UsageSample.objects.aggregate(**{f: Sum(f) for f in FIGURES})
    per_job = JobUsage.objects.aggregate(**{f: Sum(f) for f in FIGURES})
    assert per_job == pytest.approx(per_team)


# The gang's hand-computed split, in GPU-hours (above), and the serving job's restore.
GANG_H = {
    "lost_restore_gpu_h": 24 * 16 * 2 / 3600,
    "lost_topology_gpu_h": 24 * (1200 + 524 + 464) * 0.2 / 3600,
    "lost_evicted_gpu_h": 24 * 360 / 3600,
    "lost_failed_gpu_h": 24 * 464 / 1.25 / 3600,
}
SPLIT_H = {**GANG_H, "lost_restore_gpu_h": GANG_H["lost_restore_gpu_h"] + 16 * 60 / 3600}
DAY = {"start": "2026-01-01", "end": "2026-01-01"}


def _finance() -> User:
    user = UserFactory(username="fiona")
    user.groups.add(Group.objects.get_or_create(name=FINANCE)[0])
    return user


def _shown(values: list[object]) -> list[float]:
    return [round(float(str(v)), 2) for v in values]


def test_the_report_page_its_exports_and_the_api_show_the_same_split(fleet: Fleet) -> None:
    _scenario(fleet)
    report = finance_report_build(first=date(2026, 1, 1), last=date(2026, 1, 1))
    (row,) = report.rows
    for name, hours in SPLIT_H.items():
        assert getattr(row, name) == pytest.approx(hours)
    assert row.lost_unsplit_gpu_h == pytest.approx(0.0, abs=1e-9)
    expected = [round(row.lost_gpu_h, 2), *(round(h, 2) for h in SPLIT_H.values()), 0.0]
    client = Client()
    client.force_login(_finance())

    page = client.get("/reports/usage/", DAY)
    cells = re.findall(r'<td class="num">([^<]*)</td>', page.content.decode().split('id="lost-table"')[1])
    assert _shown(cells[:6]) == expected
    text = client.get("/reports/usage/", {**DAY, "format": "csv"}).content.decode()
    lines = list(csv.reader(io.StringIO(text)))
    head = next(line for line in lines if line and line[0] == "Team")
    line = next(line for line in lines if line and line[0] == fleet.team.name)
    split = head.index("Lost to restore (GPU-h)")
    assert _shown([line[head.index("Lost (GPU-h)")], *line[split : split + 5]]) == expected
    data = client.get("/reports/usage/", {**DAY, "format": "xlsx"}).content
    sheet_rows = list(load_workbook(io.BytesIO(data))["Chargeback"].iter_rows(values_only=True))
    sheet_row = next(r for r in sheet_rows if r[0] == fleet.team.name)
    assert _shown([sheet_row[head.index("Lost (GPU-h)")], *sheet_row[split : split + 5]]) == expected
    api = client.get("/api/v1/reports/usage/", DAY).json()["rows"][0]
    names = ["lost_gpu_h", *SPLIT_H, "lost_unsplit_gpu_h"]
    assert _shown([api[name] for name in names]) == expected
    lines = job_lines(user=User.objects.get(username="fiona"), first=date(2026, 1, 1), last=date(2026, 1, 1))
    gang = next(line for line in lines if line.name == "gang")
    for name, hours in GANG_H.items():
        assert getattr(gang, name) == pytest.approx(hours)


def test_usage_recorded_before_the_split_shows_as_not_split_and_the_parts_still_sum_to_lost(db: None) -> None:
    books = books_build()
    vision = {row.team: row for row in finance_report_build(first=date(2026, 1, 1), last=date(2026, 1, 31)).rows}[
        "Vision"
    ]
    # The hand-written ledger's rows predate the split: its 12 lost GPU-h are all unsplit.
    assert vision.lost_gpu_h == pytest.approx(12.0)
    assert vision.lost_unsplit_gpu_h == pytest.approx(12.0)
    # A day recorded with the split: 2 GPU-h restore, 1 topology, 3 rolled back by a failure.
    JobUsage.objects.create(
        job=books.jobs[0],
        day=date(2026, 1, 21),
        team=books.vision,
        accelerator_type=books.h100,
        kind="training",
        allocated_gpu_s=8 * 3600.0,
        useful_gpu_s=2 * 3600.0,
        lost_gpu_s=6 * 3600.0,
        lost_restore_gpu_s=2 * 3600.0,
        lost_topology_gpu_s=1 * 3600.0,
        lost_failed_gpu_s=3 * 3600.0,
    )
    report = finance_report_build(first=date(2026, 1, 1), last=date(2026, 1, 31))
    vision = {row.team: row for row in report.rows}["Vision"]
    assert (vision.lost_restore_gpu_h, vision.lost_topology_gpu_h, vision.lost_failed_gpu_h) == (2.0, 1.0, 3.0)
    assert vision.lost_unsplit_gpu_h == pytest.approx(12.0)
    assert report.totals.lost_unsplit_gpu_h == pytest.approx(12.0)
    # A month closed before the split kept no parts: all of its lost reads as not split.
    snapshot = report.to_json()
    for stored in snapshot["rows"]:
        for name in SPLIT_H:
            del stored[name]
    closed = FinanceReport.from_json(snapshot)
    assert {row.team: row.lost_unsplit_gpu_h for row in closed.rows}["Vision"] == pytest.approx(18.0)
