"""/metrics on a known fleet: every series parsed back with prometheus-client's own parser, the
figures read from the database and Redis whichever process changed them, and who may read them."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from observability.selectors import fleet_metrics_read
from scheduling.live.cycle_timings import CYCLE_TIMINGS_KEY
from scheduling.models import AcceleratorType, Allocation, FleetClock, Incident, Job, Node
from tenants.models import PriorityClass
from tests.factories import QuotaFactory
from tests.observability.conftest import redis_client, scrape


def _value(samples: dict, name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


def test_the_gauges_describe_the_fleet_as_it_stands(client: Client, known_fleet: dict) -> None:
    samples = scrape(client)
    assert _value(samples, "fleetline_gpus_capacity", accelerator="H100") == 24
    assert _value(samples, "fleetline_gpus_capacity", accelerator="A100") == 4
    assert _value(samples, "fleetline_gpus_healthy", accelerator="H100") == 16
    assert _value(samples, "fleetline_nodes", accelerator="H100", state="down") == 1
    assert _value(samples, "fleetline_gpus_allocated", team="alpha", accelerator="H100", kind="training") == 8
    assert _value(samples, "fleetline_gpus_allocated", team="beta", accelerator="H100", kind="serving") == 4
    assert _value(samples, "fleetline_gpus_borrowed", team="beta", accelerator="H100") == 4
    assert ("fleetline_gpus_borrowed", (("accelerator", "H100"), ("team", "alpha"))) not in samples
    assert _value(samples, "fleetline_jobs", team="alpha", accelerator="H100", state="pending") == 2
    assert _value(samples, "fleetline_jobs", team="beta", accelerator="H100", state="running") == 1
    assert _value(samples, "fleetline_jobs_pending_by_reason", team="alpha", reason="quota") == 1
    assert _value(samples, "fleetline_jobs_pending_by_reason", team="alpha", reason="new") == 1
    assert _value(samples, "fleetline_jobs_pending_by_reason", team="beta", reason="reserved-for") == 1
    assert _value(samples, "fleetline_incidents_open", kind="slow") == 1
    assert _value(samples, "fleetline_incidents_open", kind="dead") == 0
    assert _value(samples, "fleetline_fleet_time_seconds") == 5000
    assert _value(samples, "fleetline_redis_up") == 1
    assert 4 <= _value(samples, "fleetline_cycle_last_tick_age_seconds") < 60


def test_a_team_borrows_only_the_gpus_it_holds_beyond_its_guarantee(client: Client, known_fleet: dict) -> None:
    beta, h100 = known_fleet["beta"], AcceleratorType.objects.get(name="H100")
    QuotaFactory(team=beta, accelerator_type=h100, guaranteed=6)
    # A second run admitted on borrowed quota: beta holds 8 GPUs, every run flagged borrowing.
    second = Job.objects.create(
        team=beta,
        name="b2",
        gpus=4,
        kind="serving",
        borrowing=True,
        state=Job.State.RUNNING,
        started_s=0.0,
        anchor_s=0.0,
        priority_class=PriorityClass.objects.get(name="training"),
        accelerator_type=h100,
        duration_s=3600.0,
        submit_s=0.0,
    )
    Allocation.objects.create(job=second, node=Node.objects.filter(allocated_gpus=4).get(), gpus=4)

    samples = scrape(client)

    assert _value(samples, "fleetline_gpus_allocated", team="beta", accelerator="H100", kind="serving") == 8
    assert _value(samples, "fleetline_gpus_borrowed", team="beta", accelerator="H100") == 2


def test_the_counters_come_from_durable_rows(client: Client, known_fleet: dict) -> None:
    samples = scrape(client)
    assert _value(samples, "fleetline_cycle_ticks_total") == 42
    assert _value(samples, "fleetline_job_starts_total", team="alpha") == 2
    assert _value(samples, "fleetline_job_starts_total", team="beta") == 1
    # An eviction because a node failed is a failure's, not a preemption.
    assert _value(samples, "fleetline_preemptions_total", team="beta") == 1
    assert _value(samples, "fleetline_preemptions_total", team="alpha") == 0
    assert _value(samples, "fleetline_failures_total", kind="dead") == 1
    assert _value(samples, "fleetline_failures_total", kind="slow") == 1
    assert _value(samples, "fleetline_lost_gpu_hours_total", team="alpha", accelerator="H100") == 1.5
    assert _value(samples, "fleetline_failure_lost_gpu_hours_total", kind="dead") == 2.0


def test_the_histograms_hold_detection_recovery_and_cycle_step_times(client: Client, known_fleet: dict) -> None:
    samples = scrape(client)
    # Detected 30 s after the failure, computing again 900 s after it.
    assert _value(samples, "fleetline_failure_detection_seconds_bucket", kind="dead", le="10.0") == 0
    assert _value(samples, "fleetline_failure_detection_seconds_bucket", kind="dead", le="30.0") == 1
    assert _value(samples, "fleetline_failure_detection_seconds_sum", kind="dead") == 30
    assert _value(samples, "fleetline_failure_detection_seconds_count", kind="slow") == 0
    assert _value(samples, "fleetline_failure_recovery_seconds_bucket", kind="dead", le="600.0") == 0
    assert _value(samples, "fleetline_failure_recovery_seconds_bucket", kind="dead", le="1800.0") == 1
    assert _value(samples, "fleetline_failure_recovery_seconds_sum", kind="dead") == 900
    assert _value(samples, "fleetline_cycle_step_duration_seconds_bucket", step="engine", le="0.005") == 1
    assert _value(samples, "fleetline_cycle_step_duration_seconds_bucket", step="engine", le="0.025") == 2
    assert _value(samples, "fleetline_cycle_step_duration_seconds_count", step="total") == 2
    assert _value(samples, "fleetline_cycle_step_duration_seconds_bucket", step="total", le="0.5") == 1
    assert _value(samples, "fleetline_cycle_step_duration_seconds_sum", step="total") == pytest.approx(0.74)


def test_a_slowdown_nobody_noticed_counts_as_a_failure_with_no_recovery_time(client: Client, known_fleet: dict) -> None:
    # Within the noise: never detected, closed by the node's repair 4 fleet-hours later.
    node = Node.objects.order_by("pk").first()
    Incident.objects.create(node=node, kind="slow", slowdown=1.2, failed_at=0.0, resumed_at=14400.0, lost_gpu_s=3600.0)

    samples = scrape(client)

    assert _value(samples, "fleetline_failures_total", kind="slow") == 2
    assert _value(samples, "fleetline_incidents_open", kind="slow") == 1
    assert _value(samples, "fleetline_failure_lost_gpu_hours_total", kind="slow") == 1.0
    assert _value(samples, "fleetline_failure_recovery_seconds_count", kind="slow") == 0
    assert _value(samples, "fleetline_failure_recovery_seconds_count", kind="dead") == 1


def test_http_and_database_series_are_there_too(client: Client, known_fleet: dict) -> None:
    client.get("/healthz")
    samples = scrape(client)
    names = {name for name, _ in samples}
    assert "django_http_requests_total_by_method_total" in names
    assert "django_db_execute_total" in names


def test_a_cycle_run_by_the_leader_records_its_step_times(known_fleet: dict) -> None:
    from scheduling.cycle.leader import cycle_run_as_leader

    redis_client().delete(CYCLE_TIMINGS_KEY)
    FleetClock.objects.filter(pk=1).update(wall_updated_at=timezone.now(), leader_token=0)
    assert cycle_run_as_leader(worker="test") is not None
    steps = {histogram.step: histogram.count for histogram in fleet_metrics_read().cycle_steps}
    assert steps == {"lock": 1, "snapshot": 1, "engine": 1, "apply": 1, "commit_publish": 1, "total": 1}


def test_the_fleet_figures_take_a_fixed_number_of_queries(known_fleet: dict, django_assert_num_queries: Any) -> None:
    with django_assert_num_queries(15):
        fleet_metrics_read()


def test_a_client_outside_the_allowed_networks_without_the_token_is_refused(
    client: Client, known_fleet: dict, settings: Any
) -> None:
    settings.FLEETLINE_METRICS_TOKEN = "s3cret-scrape-token"
    response = client.get("/metrics", REMOTE_ADDR="10.1.2.3")
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert b"fleetline_" not in response.content
    wrong = client.get("/metrics", REMOTE_ADDR="10.1.2.3", HTTP_AUTHORIZATION="Bearer guessed")
    assert wrong.status_code == 401


def test_the_token_opens_metrics_from_anywhere(client: Client, known_fleet: dict, settings: Any) -> None:
    settings.FLEETLINE_METRICS_TOKEN = "s3cret-scrape-token"
    samples = scrape(client, REMOTE_ADDR="10.1.2.3", HTTP_AUTHORIZATION="Bearer s3cret-scrape-token")
    assert _value(samples, "fleetline_gpus_capacity", accelerator="H100") == 24


def test_without_a_token_configured_an_empty_bearer_opens_nothing(
    client: Client, known_fleet: dict, settings: Any
) -> None:
    settings.FLEETLINE_METRICS_TOKEN = ""
    assert client.get("/metrics", REMOTE_ADDR="10.1.2.3", HTTP_AUTHORIZATION="Bearer ").status_code == 401


def test_an_allowed_network_needs_no_token(client: Client, known_fleet: dict, settings: Any) -> None:
    settings.FLEETLINE_METRICS_ALLOWED_NETWORKS = ["10.0.0.0/8"]
    assert client.get("/metrics", REMOTE_ADDR="10.1.2.3").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="127.0.0.1").status_code == 401


def test_without_redis_the_database_figures_are_still_served(
    client: Client, known_fleet: dict, settings: Any, tmp_path: Any
) -> None:
    settings.REDIS_URL = f"unix://{tmp_path / 'nobody-listens.sock'}"
    samples = scrape(client)
    assert _value(samples, "fleetline_redis_up") == 0
    assert _value(samples, "fleetline_gpus_capacity", accelerator="H100") == 24
    assert not any(name == "fleetline_jobs_pending_by_reason" for name, _ in samples)
    assert not any(name.startswith("fleetline_cycle_step_duration_seconds") for name, _ in samples)
