"""How far a live estimate can be trusted: each job keeps its first estimate and the range shown with
it, the job page and the API show the range and how far the estimate moved, and the share of starts
within the range first shown is measured on the job rows."""

from __future__ import annotations

import io
import json

import pytest
from django.conf import settings
from django.core.management import call_command
from django.test import Client

from core.redis_pools import shared_redis
from scheduling.engine.estimate_range import DEFAULT_CALIBRATION, EstimateOutcome, StartRange, calibrate, start_range
from scheduling.estimates import CALIBRATION_KEY, EstimateView, estimate_calibration, estimates_measure
from scheduling.live.waits import job_waits_for
from scheduling.models import Job
from scheduling.templatetags.estimates import first_estimate_text, likely_text
from tests.factories import MembershipFactory
from tests.scheduling.conftest import Fleet
from tests.scheduling.waiting_jobs import HOUR, an_hour_later, no_cached_calibration, one_waiting

pytestmark = pytest.mark.usefixtures("no_cached_calibration")


def _view(low_s: float, high_s: float, first_s: float | None, first_at_s: float | None = 0.0) -> EstimateView:
    return EstimateView(5 * HOUR, StartRange(low_s, high_s), 0.8, 0, first_s, first_at_s)


@pytest.mark.parametrize(
    ("view", "likely", "first"),
    [
        (
            _view(2 * HOUR, 9 * HOUR, HOUR),
            'likely between <span data-fleet-until="7200">1h 00m</span> and '
            '<span data-fleet-until="32400">8h 00m</span> from now',
            'first estimate <span data-fleet-since="0">1h 00m</span> ago: in 1h 00m; moved +4h 00m since',
        ),
        (
            _view(HOUR + 30, 3 * HOUR, 6 * HOUR),
            'likely within <span data-fleet-until="10800">2h 00m</span>',
            'first estimate <span data-fleet-since="0">1h 00m</span> ago: in 6h 00m; moved \u22121h 00m since',
        ),
        (_view(HOUR, 2 * HOUR, 5 * HOUR + 30), "likely within", "in 5h 00m; not moved since"),
        (
            _view(HOUR + 120, 3 * HOUR, 5 * HOUR),
            'likely within <span data-fleet-until="10800">2h 00m',
            "not moved since",
        ),
        (_view(HOUR, 2 * HOUR, None), "likely within", ""),  # the first cycle gave no date
        (_view(HOUR, 2 * HOUR, None, None), "likely within", ""),  # no first estimate kept
    ],
)
def test_the_range_and_the_first_estimate_read_as_times_from_now(view: EstimateView, likely: str, first: str) -> None:
    assert likely_text(view, HOUR).startswith(likely)
    assert first_estimate_text(view, HOUR).endswith(first)
    assert likely_text(None, HOUR) == first_estimate_text(None, HOUR) == ""


def test_the_first_cycle_that_leaves_a_job_waiting_keeps_its_estimate_and_range(fleet: Fleet) -> None:
    job = one_waiting(fleet)
    wait = job_waits_for(job_ids=[job.pk])[job.pk]
    assert job.state == Job.State.PENDING and wait.estimated_start_s is not None
    shown_s = job.first_estimate_at_s
    assert shown_s is not None and job.first_estimate_s == pytest.approx(wait.estimated_start_s, abs=1.0)
    expected = start_range(DEFAULT_CALIBRATION, gpus=8, now_s=shown_s, estimated_start_s=job.first_estimate_s)
    assert (job.first_estimate_low_s, job.first_estimate_high_s) == pytest.approx((expected.low_s, expected.high_s))

    fleet.tick()
    Job.objects.filter(pk=job.pk).update(first_estimate_s=job.first_estimate_s - HOUR)  # as if told earlier
    fleet.tick()
    again = Job.objects.get(pk=job.pk)
    assert (again.first_estimate_at_s, again.first_estimate_s) == (shown_s, job.first_estimate_s - HOUR)


def test_a_job_that_starts_in_its_first_cycle_has_no_first_estimate(fleet: Fleet) -> None:
    job = fleet.submit(gpus=8, name="fits")
    fleet.tick()
    job.refresh_from_db()
    assert job.state == Job.State.RUNNING and job.first_estimate_at_s is None


def test_the_job_page_shows_the_likely_range_and_how_far_the_estimate_moved(fleet: Fleet) -> None:
    job = one_waiting(fleet)
    assert job.first_estimate_s is not None
    Job.objects.filter(pk=job.pk).update(first_estimate_s=job.first_estimate_s - 2 * HOUR)
    client = Client()
    client.force_login(MembershipFactory(team=fleet.team).user)

    html = client.get(f"/jobs/{job.pk}/").content.decode()

    assert 'id="job-likely"' in html and "likely within" in html
    assert "moved +2h 00m since" in html
    assert "of starts on replays of real traces" in html  # no history yet: the default calibration

    listed = client.get("/jobs/").content.decode()
    assert listed.count("likely ") == 1  # the waiting job's row; the running one has no range


def test_the_share_of_starts_within_the_range_first_shown_is_measured_on_the_rows(fleet: Fleet) -> None:
    job = one_waiting(fleet)
    other = fleet.submit(gpus=8, name="still-waits", duration_s=HOUR, time_limit_s=HOUR)
    an_hour_later(fleet)
    job.refresh_from_db()
    assert job.state == Job.State.RUNNING and job.started_s is not None

    measured = estimates_measure()
    started = list(Job.objects.filter(first_estimate_low_s__isnull=False, started_s__isnull=False))
    held = [row for row in started if row.first_estimate_low_s <= row.started_s <= row.first_estimate_high_s]
    assert job in started and (measured.started, measured.within) == (len(started), len(held))
    assert measured.waiting == Job.objects.filter(pk=other.pk, state=Job.State.PENDING).count()

    out = io.StringIO()
    call_command("estimates_measure", stdout=out)
    report = json.loads(out.getvalue())
    assert report["started"] == measured.started and report["estimate_within_range"] == measured.share
    assert report["calibration"]["bands"][-1]["up_to_s"] is None


def test_the_calibration_comes_from_the_latest_estimates_of_this_fleet_once_there_are_enough(fleet: Fleet) -> None:
    template = one_waiting(fleet)
    # Forty earlier first estimates of two hours, each started after one.
    rows = [
        Job(
            team=template.team,
            priority_class=template.priority_class,
            accelerator_type=template.accelerator_type,
            name=f"past-{n}",
            gpus=1,
            duration_s=60.0,
            submit_s=0.0,
            state=Job.State.COMPLETED,
            first_estimate_at_s=float(n),
            first_estimate_s=float(n) + 2 * HOUR,
            first_estimate_low_s=float(n),
            first_estimate_high_s=float(n) + 3 * HOUR,
            started_s=float(n) + HOUR,
            finished_s=float(n) + HOUR + 60.0,
        )
        for n in range(40)
    ]
    Job.objects.bulk_create(rows)
    shared_redis(settings.REDIS_URL).delete(CALIBRATION_KEY)  # as when the kept one expires

    calibration = estimate_calibration(now_s=10 * HOUR)

    outcomes = [EstimateOutcome(1, 2 * HOUR, HOUR, True, True)] * 40
    assert calibration.samples == 41  # and the job still waiting
    band, learned = calibration.band_for(1, 2 * HOUR), calibrate(outcomes, fallback=DEFAULT_CALIBRATION)
    assert (band.low, band.high) == (learned.band_for(1, 2 * HOUR).low, learned.band_for(1, 2 * HOUR).high)
    assert calibration.source == "this fleet's latest estimates"
    # Kept for the next reader.
    assert estimate_calibration() == calibration


__all__ = ["no_cached_calibration"]
