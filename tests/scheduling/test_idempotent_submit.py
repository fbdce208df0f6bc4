"""Submitting through API v1 with an Idempotency-Key: a retry gets the first job, never a second
one, also while Redis is down; while the database is down the API answers 503 with Retry-After.

Outages are real: Redis and PostgreSQL are pointed at a local port nothing listens on."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.db import connection
from rest_framework.test import APIClient

from scheduling.models import Job
from tests.factories import MembershipFactory
from tests.scheduling.conftest import Fleet


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def redis_down(settings: Any) -> str:
    """Redis, the channel layer and the broker all at a port nothing listens on."""
    url = f"redis://127.0.0.1:{_closed_port()}/0"
    settings.REDIS_URL = url
    settings.CHANNEL_LAYERS = {
        "default": {"BACKEND": "channels_redis.core.RedisChannelLayer", "CONFIG": {"hosts": [url]}}
    }
    settings.CELERY_BROKER_URL = url
    return url


@contextmanager
def database_down() -> Iterator[None]:
    """The default database unreachable until the block ends: a closed port for PostgreSQL, a
    path that cannot exist for SQLite."""
    saved = dict(connection.settings_dict)
    connection.close()
    if connection.vendor == "postgresql":
        connection.settings_dict.update(HOST="127.0.0.1", PORT=str(_closed_port()))
    else:
        connection.settings_dict["NAME"] = "/nonexistent/fleetline.sqlite3"
    try:
        yield
    finally:
        connection.close()
        connection.settings_dict.clear()
        connection.settings_dict.update(saved)


def _client(fleet: Fleet) -> APIClient:
    client = APIClient()
    client.force_authenticate(MembershipFactory(team=fleet.team).user)
    return client


def _payload(fleet: Fleet, **overrides: object) -> dict[str, object]:
    return {
        "team": fleet.team.slug,
        "name": "retried-run",
        "priority_class": fleet.training.name,
        "accelerator": fleet.accelerator.name,
        "gpus": 8,
        "duration_s": 3600,
        **overrides,
    }


def _submit(client: APIClient, payload: dict[str, object], key: str | None) -> Any:
    headers = {} if key is None else {"Idempotency-Key": key}
    return client.post("/api/v1/jobs/", payload, format="json", headers=headers)


def _errors(response: Any, attr: str | None) -> list[str]:
    """The messages of an API v1 error about ``attr``."""
    return [error["detail"] for error in response.json()["errors"] if error["attr"] == attr]


def test_a_retry_with_the_same_key_gets_the_first_job_back(fleet: Fleet) -> None:
    client = _client(fleet)

    first = _submit(client, _payload(fleet), "order-1")
    again = _submit(client, _payload(fleet), "order-1")

    assert (first.status_code, again.status_code) == (201, 201)
    assert again.json() == first.json()
    assert again["Idempotent-Replayed"] == "true"
    assert Job.objects.count() == 1


def test_reusing_a_key_for_a_different_job_is_refused(fleet: Fleet) -> None:
    client = _client(fleet)
    first = _submit(client, _payload(fleet), "order-1")

    response = _submit(client, _payload(fleet, gpus=16), "order-1")

    assert response.status_code == 400
    assert f"different submission (job {first.json()['id']})" in _errors(response, "idempotency_key")[0]
    assert Job.objects.count() == 1


def test_keys_belong_to_their_submitter_and_submissions_without_a_key_are_not_merged(fleet: Fleet) -> None:
    alice, bob = _client(fleet), _client(fleet)

    ids = {
        _submit(alice, _payload(fleet), "shared-key").json()["id"],
        _submit(bob, _payload(fleet), "shared-key").json()["id"],
        _submit(alice, _payload(fleet), None).json()["id"],
        _submit(alice, _payload(fleet), None).json()["id"],
    }

    assert len(ids) == Job.objects.count() == 4


@pytest.mark.parametrize("key", ["k" * 256, "naïve-key"])
def test_a_key_that_is_too_long_or_not_ascii_is_refused(fleet: Fleet, key: str) -> None:
    response = _submit(_client(fleet), _payload(fleet), key)

    assert response.status_code == 400
    assert "Idempotency-Key must be 1 to 255 printable ASCII characters" in _errors(response, "idempotency_key")[0]
    assert not Job.objects.exists()


def test_during_a_redis_outage_a_submission_is_stored_once_however_often_it_is_retried(
    fleet: Fleet, redis_down: str, caplog: pytest.LogCaptureFixture
) -> None:
    client = _client(fleet)

    first = _submit(client, _payload(fleet), "outage-1")
    retry = _submit(client, _payload(fleet), "outage-1")

    assert first.status_code == 201
    assert first.json()["pending"]["reason"] == "new"
    assert retry.status_code == 201
    assert retry.json()["id"] == first.json()["id"]
    assert Job.objects.count() == 1
    assert "Redis is unreachable" in caplog.text


def test_during_a_redis_outage_jobs_are_still_listed_without_pending_reasons(fleet: Fleet, redis_down: str) -> None:
    job = fleet.submit(gpus=8)
    client = _client(fleet)

    listed = client.get("/api/v1/jobs/")
    detail = client.get(f"/api/v1/jobs/{job.pk}/")

    assert listed.status_code == detail.status_code == 200
    assert [row["id"] for row in listed.json()["results"]] == [job.pk]
    assert detail.json()["pending"] is None


@pytest.mark.django_db(transaction=True)
def test_while_the_database_is_down_a_submission_answers_503_with_retry_after_and_a_retry_succeeds(
    fleet: Fleet,
) -> None:
    client = _client(fleet)
    # The 503 is reported as a server error (the signal error trackers listen to), which the test
    # client would otherwise raise instead of returning the answer.
    client.raise_request_exception = False

    with database_down():
        refused = _submit(client, _payload(fleet), "db-outage-1")
    retried = _submit(client, _payload(fleet), "db-outage-1")

    assert refused.status_code == 503
    assert refused["Retry-After"] == "5"
    assert _errors(refused, None) == ["Briefly unavailable: retry in 5 s."]
    assert retried.status_code == 201
    assert Job.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_simultaneous_retries_with_one_key_make_one_job(fleet: Fleet) -> None:
    user = MembershipFactory(team=fleet.team).user
    payload = _payload(fleet)
    start = threading.Barrier(6)
    answers: list[tuple[int, int]] = []

    def attempt() -> None:
        client = APIClient()
        client.force_authenticate(user)
        start.wait()
        try:
            response = _submit(client, payload, "burst-1")
            answers.append((response.status_code, response.json()["id"]))
        finally:
            connection.close()

    threads = [threading.Thread(target=attempt) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert len(answers) == 6
    assert {status for status, _ in answers} == {201}
    assert len({job_id for _, job_id in answers}) == 1
    assert Job.objects.count() == 1
