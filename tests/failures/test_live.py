"""Failures in the live fleet: heartbeats, detection, restart from checkpoint, incidents, admin actions."""

from __future__ import annotations

import os
from datetime import UTC, datetime

import pytest

if "DJANGO_SETTINGS_MODULE" not in os.environ:  # the pure run (-p no:django) skips this module
    pytest.skip("needs Django", allow_module_level=True)

from django.contrib.auth.models import Group  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402

from scheduling.cycle.failures import _repair, node_kill  # noqa: E402
from scheduling.engine.failures import FailureRates  # noqa: E402
from scheduling.models import Allocation, FleetClock, Incident, Job, Node  # noqa: E402
from tenants.models import AuditEvent  # noqa: E402
from tenants.roles import FLEET_ADMIN  # noqa: E402
from tests.factories import MembershipFactory, TeamFactory, UserFactory  # noqa: E402
from tests.scheduling.conftest import Fleet, build_fleet  # noqa: E402


@pytest.fixture
def fleet(db: None) -> Fleet:
    return build_fleet()


def _client(user: object) -> Client:
    client = Client()
    client.force_login(user)  # type: ignore[arg-type]
    return client


@pytest.fixture
def admin(fleet: Fleet) -> Client:
    user = UserFactory()
    user.groups.add(Group.objects.get_or_create(name=FLEET_ADMIN)[0])
    return _client(user)


@pytest.fixture
def member(fleet: Fleet) -> Client:
    return _client(MembershipFactory(team=fleet.team).user)


@pytest.fixture
def outsider(fleet: Fleet) -> Client:
    return _client(MembershipFactory(team=TeamFactory(name="Other", slug="other")).user)


def _nodes_of(job: Job) -> set[int]:
    return set(Allocation.objects.filter(job=job).values_list("node_id", flat=True))


def _running_gang(fleet: Fleet) -> Job:
    job = fleet.submit(gpus=16, duration_s=36000.0, checkpoint_interval_s=60.0, checkpoint_gb=50.0)
    for _ in range(3):
        fleet.tick(speed=60.0)  # 3 fleet-minutes: checkpoints at 60 and 120 s of work
    job.refresh_from_db()
    assert job.state == Job.State.RUNNING
    return job


def test_a_node_killed_in_the_db_is_detected_after_k_intervals_and_its_gang_restarts_elsewhere(fleet: Fleet) -> None:
    job = _running_gang(fleet)
    victim = Node.objects.get(pk=sorted(_nodes_of(job))[0])
    incident = node_kill(node=victim, sim_now_s=FleetClock.objects.get().sim_now_s)

    # 5 fleet seconds per tick: 3 missed 10 s heartbeats take 6 ticks.
    for _ in range(5):
        fleet.tick(speed=5.0)
    incident.refresh_from_db()
    assert incident.detected_at is None

    fleet.tick(speed=5.0)
    incident.refresh_from_db()
    victim.refresh_from_db()
    assert incident.detected_at == pytest.approx(incident.failed_at + 30.0)
    assert victim.state == Node.State.DOWN and victim.healthy_gpus == 0
    assert list(incident.jobs.all()) == [job]
    assert incident.lost_gpu_s > 0

    for _ in range(3):
        fleet.tick(speed=5.0)
    job.refresh_from_db()
    incident.refresh_from_db()
    assert job.state == Job.State.RUNNING and job.restarts >= 1
    assert victim.pk not in _nodes_of(job) and len(_nodes_of(job)) == 2
    # Resumed from its checkpoint, not from zero.
    assert job.base_progress_s >= 120.0
    assert incident.replaced_at is not None and incident.replaced_at >= incident.detected_at
    assert incident.resumed_at is not None and incident.resumed_at >= incident.replaced_at


def test_a_silent_node_never_takes_new_work(fleet: Fleet) -> None:
    victim = fleet.nodes[0]
    node_kill(node=victim, sim_now_s=FleetClock.objects.get().sim_now_s)
    for _ in range(7):
        fleet.tick(speed=5.0)
    job = fleet.submit(gpus=24)

    fleet.tick(speed=5.0)

    job.refresh_from_db()
    assert job.state == Job.State.RUNNING and victim.pk not in _nodes_of(job)


def test_the_failure_model_runs_in_the_live_fleet_when_turned_on(fleet: Fleet, settings: object) -> None:
    settings.FLEET_FAILURES = True  # type: ignore[attr-defined]
    _running_gang(fleet)

    for _ in range(40):
        fleet.tick(wall_step_s=5.0, speed=600.0)  # 3,000 fleet seconds a tick: 33 fleet-hours

    assert Incident.objects.exists()
    for node in Node.objects.all():
        assert node.allocated_gpus <= node.healthy_gpus or node.state != Node.State.UP


@pytest.mark.parametrize("action", ["cordon", "uncordon", "drain"])
def test_members_and_outsiders_get_404_for_node_actions(
    fleet: Fleet, member: Client, outsider: Client, action: str
) -> None:
    node = fleet.nodes[0]
    for client in (member, outsider):
        response = client.post("/fleet/node-action/", {"node": node.pk, "action": action})
        assert response.status_code == 404
    node.refresh_from_db()
    assert node.state == Node.State.UP
    assert not AuditEvent.objects.filter(kind__startswith="node.").exists()


def test_an_admin_cordons_and_uncordons_a_node_and_both_are_audited(fleet: Fleet, admin: Client) -> None:
    node = fleet.nodes[0]

    assert admin.post("/fleet/node-action/", {"node": node.pk, "action": "cordon"}).status_code == 302
    node.refresh_from_db()
    assert node.state == Node.State.CORDONED
    admin.post("/fleet/node-action/", {"node": node.pk, "action": "uncordon"})
    node.refresh_from_db()

    assert node.state == Node.State.UP
    events = list(AuditEvent.objects.filter(kind__startswith="node.").order_by("id"))
    assert [(e.kind, e.before["state"], e.after["state"]) for e in events] == [
        ("node.cordon", "up", "cordoned"),
        ("node.uncordon", "cordoned", "up"),
    ]


def test_a_drained_nodes_gang_leaves_at_once_and_restarts_elsewhere_from_its_checkpoint(
    fleet: Fleet, admin: Client
) -> None:
    job = _running_gang(fleet)
    node_id = sorted(_nodes_of(job))[0]

    admin.post("/fleet/node-action/", {"node": node_id, "action": "drain", "evicts": str(job.pk)})  # as confirmed
    fleet.tick(speed=5.0)
    fleet.tick(speed=5.0)

    job.refresh_from_db()
    assert Node.objects.get(pk=node_id).state == Node.State.CORDONED
    assert job.state == Job.State.RUNNING and node_id not in _nodes_of(job)
    assert job.base_progress_s >= 120.0
    assert AuditEvent.objects.filter(kind="node.drain").count() == 1


def test_every_logged_in_user_sees_the_incidents_page_with_the_timeline(fleet: Fleet, outsider: Client) -> None:
    node_kill(node=fleet.nodes[0], sim_now_s=0.0)

    response = outsider.get("/incidents/")

    assert response.status_code == 200
    assert fleet.nodes[0].name in response.content.decode()
    assert Client().get("/incidents/").status_code == 302


def test_repair_reads_only_the_latest_incident_of_each_node_out_of_service(fleet: Fleet) -> None:
    in_service, down = fleet.nodes[0], fleet.nodes[1]
    Incident.objects.bulk_create(
        Incident(node=in_service, kind=Incident.Kind.DEAD, failed_at=i, detected_at=i + 30.0, resumed_at=i + 60.0)
        for i in range(40)
    )
    Node.objects.filter(pk=down.pk).update(state=Node.State.DOWN, healthy_gpus=0)
    Incident.objects.create(node=down, kind=Incident.Kind.DEAD, failed_at=0.0, detected_at=30.0, resumed_at=60.0)
    latest = Incident.objects.create(node=down, kind=Incident.Kind.DEAD, failed_at=100.0, detected_at=130.0)
    rates = FailureRates()
    wall_now = datetime(2026, 1, 2, tzinfo=UTC)

    with CaptureQueriesContext(connection) as queries:
        _repair(rates, 1e6, wall_now)

    # One query, however long the history; the node's gangs are not back yet, so it stays down.
    assert len(queries) == 1
    down.refresh_from_db()
    assert down.state == Node.State.DOWN

    Incident.objects.filter(pk=latest.pk).update(resumed_at=160.0)
    _repair(rates, 100.0 + rates.crash_repair_s - 1.0, wall_now)
    down.refresh_from_db()
    assert down.state == Node.State.DOWN  # not repaired yet
    _repair(rates, 100.0 + rates.crash_repair_s, wall_now)
    down.refresh_from_db()
    assert (down.state, down.healthy_gpus, down.last_heartbeat) == (Node.State.UP, down.gpus, wall_now)
