"""A pending job's estimate in the API: the range it is likely to start within, and the first
estimate the job was shown, documented in the schema."""

from __future__ import annotations

import pytest

from scheduling.engine.estimate_range import DEFAULT_CALIBRATION, start_range
from scheduling.services.jobs import fleet_now_s
from tests.api.conftest import People
from tests.scheduling.waiting_jobs import an_hour_later, no_cached_calibration, one_waiting

pytestmark = pytest.mark.usefixtures("no_cached_calibration")
__all__ = ["no_cached_calibration"]


def test_the_api_gives_the_range_and_the_first_estimate_and_documents_them(people: People) -> None:
    job = one_waiting(people.fleet)
    client = people.client("member")

    body = client.get(f"/api/v1/jobs/{job.pk}/").json()

    pending, first = body["pending"], body["first_estimate"]
    # A fleet without 20 first estimates of its own shows the ranges measured on replays.
    likely = start_range(
        DEFAULT_CALIBRATION, gpus=8, now_s=fleet_now_s(), estimated_start_s=pending["estimated_start_s"]
    )
    assert (pending["likely_start_from_s"], pending["likely_start_until_s"]) == (likely.low_s, likely.high_s)
    assert pending["likely_start_from_s"] < pending["likely_start_until_s"]
    assert pending["likely_share"] == 0.8
    assert first == {
        "shown_s": job.first_estimate_at_s,
        "estimated_start_s": job.first_estimate_s,
        "likely_start_from_s": job.first_estimate_low_s,
        "likely_start_until_s": job.first_estimate_high_s,
    }
    schema = client.get("/api/v1/schema/?format=json").json()["components"]["schemas"]
    assert {"likely_start_from_s", "likely_start_until_s", "likely_share"} <= set(schema["PendingOutput"]["properties"])
    assert "first_estimate" in schema["JobOutput"]["properties"]


def test_a_running_job_keeps_its_first_estimate_in_the_api_and_no_range(people: People) -> None:
    job = one_waiting(people.fleet)
    an_hour_later(people.fleet)  # the big job ends, the small one starts
    body = people.client("member").get(f"/api/v1/jobs/{job.pk}/").json()
    assert body["state"] == "running" and body["pending"] is None
    assert body["first_estimate"]["estimated_start_s"] == job.first_estimate_s
