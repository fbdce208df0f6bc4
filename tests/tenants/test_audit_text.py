"""The audit log shows only what changed, in people's units, one line per field."""

from __future__ import annotations

import pytest

from tenants.audit_text import Change, audit_changes
from tenants.models import AuditEvent
from tenants.services.audit import audit_record
from tests.tenants.conftest import World, client_for


@pytest.mark.parametrize(
    ("before", "after", "expected"),
    [
        (
            {"fairshare_half_life_s": 604800.0, "backfill": True},
            {"fairshare_half_life_s": 432000.0, "backfill": False},
            [Change("Fair-share half-life", "7 days", "5 days"), Change("Backfill", "on", "off")],
        ),
        (
            {"topology_penalty_pod": 1.15, "guarantee_overcommit_ratio": 1.0, "reclaim_after_s": 14400.0},
            {"topology_penalty_pod": 1.2, "guarantee_overcommit_ratio": 1.25, "reclaim_after_s": None},
            [
                Change("Slowdown across racks of one pod", "15 %", "20 %"),
                Change("Guarantees may total", "100 %", "125 %"),
                Change("Evict anyway after waiting", "4 h", "none"),
            ],
        ),
        (
            {"state": "pending", "guaranteed": 16, "borrow_limit": None},
            {"state": "approved", "guaranteed": 16, "borrow_limit": 8},
            [Change("State", "pending", "approved"), Change("Borrow limit", "unlimited", "8")],
        ),
        (None, {"user": "ada", "role": "member"}, [Change("User", None, "ada"), Change("Role", None, "member")]),
        ({"user": "ada", "role": "lead"}, None, [Change("User", "ada", None), Change("Role", "lead", None)]),
        ({"value": 100}, {"value": 100}, []),
    ],
    ids=["policy-units", "percent-and-empty", "quota-request", "created", "removed", "unchanged"],
)
def test_an_audit_entry_reads_as_the_fields_that_changed(
    before: dict[str, object] | None, after: dict[str, object] | None, expected: list[Change]
) -> None:
    assert audit_changes(before=before, after=after) == expected


@pytest.mark.django_db
def test_the_audit_log_page_shows_changes_not_dictionaries_and_names_the_scheduler(world: World) -> None:
    audit_record(
        actor=world.admin,
        kind=AuditEvent.Kind.FLEET_POLICY_UPDATED,
        object_repr="Fleet policy: fairshare_half_life_s",
        before={"fairshare_half_life_s": 604800.0},
        after={"fairshare_half_life_s": 86400.0},
    )
    audit_record(actor=None, kind=AuditEvent.Kind.NODE_CORDONED, object_repr="node-0001", after={"state": "cordoned"})

    page = client_for(world.admin).get("/admin-portal/audit/").content.decode()
    assert "Fair-share half-life</span>: 7 days" in page and "<strong>1 day</strong>" in page
    assert "{&#x27;" not in page and "604800" not in page
    assert "the scheduler" in page


@pytest.mark.django_db
def test_the_detectors_cordons_and_drains_are_audited_as_the_scheduler() -> None:
    from scheduling.cycle.failures import node_kill
    from scheduling.models import FleetClock, Incident, Node
    from tests.scheduling.conftest import build_fleet

    fleet = build_fleet()
    gang = fleet.submit(gpus=8, duration_s=36_000.0)
    fleet.tick()
    slow = Node.objects.get(allocations__job=gang)
    dead = next(node for node in fleet.nodes if node.pk != slow.pk)
    node_kill(node=dead, sim_now_s=FleetClock.objects.get().sim_now_s)
    # Slow since long ago under a running gang (the detector compares its step times): detected
    # at the first tick that looks.
    incident = Incident.objects.create(node=slow, kind=Incident.Kind.SLOW, failed_at=-10_000.0, slowdown=2.0)
    incident.jobs.set([gang])
    for _ in range(8):
        fleet.tick(speed=5.0)

    assert Node.objects.get(pk=slow.pk).state == Node.State.CORDONED
    cordon = AuditEvent.objects.get(kind=AuditEvent.Kind.NODE_CORDONED)
    assert cordon.actor is None and slow.name in cordon.object_repr and "2.00x" in cordon.object_repr
    drain = AuditEvent.objects.get(kind=AuditEvent.Kind.NODE_DRAINED)
    assert drain.actor is None and dead.name in drain.object_repr
    assert drain.after["state"] == "down"
