"""/healthz answers while the process runs; /readyz only while the database and Redis answer and
the scheduling cycle ticked recently."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from scheduling.models import FleetClock


@pytest.fixture
def ticking(db: None) -> None:
    FleetClock.objects.update_or_create(pk=1, defaults={"wall_updated_at": timezone.now() - timedelta(seconds=2)})


def test_healthz_answers_without_touching_the_database(client: Client) -> None:
    # No database fixture: any query would fail the test.
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.content == b"ok\n"


def test_readyz_is_ready_when_the_database_redis_and_a_recent_tick_are_there(client: Client, ticking: None) -> None:
    response = client.get("/readyz")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ready"
    assert {name for name, check in body["checks"].items() if check["ok"]} == {"database", "redis", "tick"}


def test_readyz_fails_when_the_last_tick_is_older_than_the_bound(client: Client, db: None, settings: Any) -> None:
    settings.FLEETLINE_READY_TICK_MAX_AGE_S = 30
    FleetClock.objects.update_or_create(pk=1, defaults={"wall_updated_at": timezone.now() - timedelta(seconds=45)})
    response = client.get("/readyz")
    assert response.status_code == 503
    tick = response.json()["checks"]["tick"]
    assert tick["ok"] is False
    assert "more than 30 s" in tick["detail"]


def test_readyz_fails_before_the_first_tick(client: Client, db: None) -> None:
    FleetClock.objects.all().delete()
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json()["checks"]["tick"]["detail"] == "no scheduling cycle has run yet"


def test_readyz_fails_when_redis_does_not_answer(client: Client, ticking: None, settings: Any, tmp_path: Any) -> None:
    settings.REDIS_URL = f"unix://{tmp_path / 'nobody-listens.sock'}"
    response = client.get("/readyz")
    assert response.status_code == 503
    checks = response.json()["checks"]
    assert checks["redis"]["ok"] is False
    assert checks["database"]["ok"] is True


def test_health_endpoints_need_no_login(client: Client, ticking: None) -> None:
    assert client.get("/healthz").status_code == 200
    assert client.get("/readyz").status_code == 200
