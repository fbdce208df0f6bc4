"""One timeline per job: every eviction, requeue and move off a failed node is an event in the job's
history that names its cause, links its incident and node, counts as a restart, and is told to the
submitter as what it was."""

from __future__ import annotations

import os

import pytest

if "DJANGO_SETTINGS_MODULE" not in os.environ:  # the pure run (-p no:django) skips this module
    pytest.skip("needs Django", allow_module_level=True)

from django.contrib.auth.models import User  # noqa: E402
from django.test import Client  # noqa: E402

from scheduling.convert import policy_from_row  # noqa: E402
from scheduling.cycle.failures import detector_policy, failure_apply, node_kill  # noqa: E402
from scheduling.engine.failures import SLOW, Failure, FailureRates  # noqa: E402
from scheduling.models import Allocation, FleetClock, Incident, Job, Node, SchedulerEvent  # noqa: E402
from tenants.models import FleetPolicy, Notification  # noqa: E402
from tests.factories import MembershipFactory  # noqa: E402
from tests.scheduling.conftest import Fleet, build_fleet  # noqa: E402

Kind = SchedulerEvent.Kind


def _nodes_of(job: Job) -> set[int]:
    return set(Allocation.objects.filter(job=job).values_list("node_id", flat=True))


def _history(job: Job) -> list[SchedulerEvent]:
    """The job's events, oldest first."""
    return list(SchedulerEvent.objects.filter(job=job).select_related("node").order_by("id"))


@pytest.fixture
def fleet(db: None) -> Fleet:
    return build_fleet()


@pytest.fixture
def submitter(fleet: Fleet) -> User:
    user: User = MembershipFactory(team=fleet.team).user
    return user


def _running_gang(fleet: Fleet, submitter: User) -> Job:
    job = fleet.submit(gpus=16, duration_s=36000.0, checkpoint_interval_s=60.0, checkpoint_gb=50.0, name="pretrain")
    Job.objects.filter(pk=job.pk).update(submitted_by=submitter)
    for _ in range(3):
        fleet.tick(speed=60.0)  # 3 fleet-minutes: checkpoints at 60 and 120 s of work
    job.refresh_from_db()
    assert job.state == Job.State.RUNNING
    return job


def _through_a_dead_node(fleet: Fleet, submitter: User) -> tuple[Job, Incident, Node]:
    job = _running_gang(fleet, submitter)
    victim = Node.objects.get(pk=sorted(_nodes_of(job))[0])
    incident = node_kill(node=victim, sim_now_s=FleetClock.objects.get().sim_now_s)
    for _ in range(9):  # found at the 6th tick of 5 fleet seconds, restarted elsewhere by the 9th
        fleet.tick(speed=5.0)
    job.refresh_from_db()
    incident.refresh_from_db()
    assert incident.detected_at is not None and job.state == Job.State.RUNNING
    assert victim.pk not in _nodes_of(job)
    return job, incident, victim


def test_a_gang_on_a_node_that_dies_is_evicted_by_node_failure_with_its_incident_and_node_then_started_again(
    fleet: Fleet, submitter: User
) -> None:
    job, incident, victim = _through_a_dead_node(fleet, submitter)

    history = _history(job)
    evictions = [event for event in history if event.kind == Kind.EVICTED]
    (evicted,) = evictions
    # The incident says the node is dead: so does the eviction, not the triage's "node-degraded".
    assert incident.kind == Incident.Kind.DEAD
    assert evicted.cause == "node-failed"
    said = f"Evicted by node failure on node {victim.name}, requeued from its last checkpoint at step"
    assert evicted.message.startswith(said)
    assert "node-degraded" not in evicted.message
    assert (evicted.incident_id, evicted.node_id) == (incident.pk, victim.pk)
    assert evicted.sim_time_s == pytest.approx(incident.detected_at)
    assert job.restarts == 1
    starts = [event for event in history if event.kind == Kind.STARTED]
    assert len(starts) == 2 and starts[0].id < evicted.id < starts[1].id


def test_the_job_page_shows_the_eviction_with_links_to_its_incident_and_node(fleet: Fleet, submitter: User) -> None:
    job, incident, victim = _through_a_dead_node(fleet, submitter)
    client = Client()
    client.force_login(submitter)

    page = client.get(f"/jobs/{job.pk}/").content.decode()

    assert f"Evicted by node failure on node {victim.name}" in page
    assert f'href="/incidents/#incident-{incident.pk}"' in page
    assert f'href="/fleet/#node-{victim.pk}"' in page
    assert 'id="job-events"' in page


def test_the_submitter_of_a_job_a_dead_node_requeued_is_told_it_was_requeued_not_that_it_failed(
    fleet: Fleet, submitter: User
) -> None:
    job, _, victim = _through_a_dead_node(fleet, submitter)

    told = [notice.message for notice in Notification.objects.filter(user=submitter).order_by("id")]

    about_the_failure = [message for message in told if "node failure" in message]
    assert about_the_failure, told
    assert not any("failed" in message.replace("node failure", "") for message in told), told
    assert about_the_failure[0].startswith(f"Your job {job.name} was evicted by node failure on node {victim.name}")
    assert "requeued from its last checkpoint at step" in about_the_failure[0]


# A slow node: its gangs leave at their next checkpoint through the preemption grace.


def _running_on(fleet: Fleet, name: str, gpus: int, on: list[tuple[Node, int]]) -> Job:
    """A job already running on `on` for 1,000 fleet seconds, written as the cycle writes one."""
    job = fleet.submit(gpus=gpus, duration_s=36000.0, name=name, checkpoint_interval_s=300.0)
    started_s = FleetClock.objects.get().sim_now_s - 1000.0
    Job.objects.filter(pk=job.pk).update(
        state=Job.State.RUNNING, started_s=started_s, anchor_s=started_s, placement_level="node"
    )
    for node, held in on:
        Allocation.objects.create(job=job, node=node, gpus=held)
        Node.objects.filter(pk=node.pk).update(allocated_gpus=node.allocated_gpus + held)
    job.refresh_from_db()
    return job


def test_a_gang_moved_off_a_slow_node_has_the_move_in_its_history_and_counts_a_restart(db: None) -> None:
    fleet = build_fleet(nodes_per_rack=3)
    slow, *others = fleet.nodes
    job = _running_on(fleet, "on-slow", 4, [(slow, 4)])
    for node in others[2:]:  # the other rack is busy; one rack has room to move to
        _running_on(fleet, f"filler-{node.pk}", 8, [(node, 8)])
    row = FleetPolicy.objects.get()
    failure = Failure(FleetClock.objects.get().sim_now_s, str(slow.pk), SLOW, slowdown=1.5)
    failure_apply(
        node=slow, failure=failure, rates=FailureRates(), penalties=policy_from_row(row), policy=detector_policy(row)
    )

    for _ in range(60):
        fleet.tick(speed=15.0)
        if Incident.objects.get().resumed_at is not None:
            break

    incident = Incident.objects.get()
    job.refresh_from_db()
    assert incident.resumed_at is not None
    assert job.state == Job.State.RUNNING and slow.pk not in _nodes_of(job)
    assert job.restarts == 1
    history = _history(job)
    (asked,) = [event for event in history if event.kind == Kind.PREEMPTING]
    assert (asked.cause, asked.incident_id, asked.node_id) == ("node-slow", incident.pk, slow.pk)
    assert f"node {slow.name} is slow" in asked.message
    (moved,) = [event for event in history if event.kind == Kind.EVICTED]
    assert (moved.cause, moved.incident_id, moved.node_id) == ("node-slow", incident.pk, slow.pk)
    assert moved.message.startswith(f"Moved off slow node {slow.name}, requeued from its last checkpoint at step")
    (started,) = [event for event in history if event.kind == Kind.STARTED]
    assert asked.id < moved.id < started.id
