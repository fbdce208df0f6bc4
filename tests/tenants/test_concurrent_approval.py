"""Two admins approve at the same instant two requests that only fit one at a time."""

from __future__ import annotations

import threading

import pytest
from django.core.exceptions import ValidationError
from django.db import connection

from tenants.models import AuditEvent, Quota, QuotaRequest
from tenants.services import quota_request_approve
from tests.factories import FleetPolicyFactory, QuotaRequestFactory
from tests.tenants.conftest import World


def _approve_together(admin: object, request_ids: list[int]) -> list[str]:
    barrier = threading.Barrier(len(request_ids))
    outcomes: list[str] = []

    def approve(request_id: int) -> None:
        try:
            barrier.wait(timeout=10)
            quota_request_approve(admin=admin, quota_request_id=request_id)  # type: ignore[arg-type]
            outcomes.append("approved")
        except ValidationError as exc:
            outcomes.append("refused: " + " ".join(exc.messages))
        except Exception as exc:  # noqa: BLE001 - reported below, the test must not hang
            outcomes.append(f"error: {exc!r}")
        finally:
            # Each thread has its own connection; close it so the test database can be flushed.
            connection.close()

    threads = [threading.Thread(target=approve, args=(pk,)) for pk in request_ids]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return sorted(outcomes)


@pytest.mark.django_db(transaction=True)
def test_concurrent_approvals_that_together_exceed_capacity_let_exactly_one_through(world: World) -> None:
    FleetPolicyFactory()
    first = QuotaRequestFactory(team=world.team, accelerator_type=world.h100, requested_by=world.lead, guaranteed=20)
    second = QuotaRequestFactory(
        team=world.other_team, accelerator_type=world.h100, requested_by=world.outsider, guaranteed=20
    )

    outcomes = _approve_together(world.admin, [first.pk, second.pk])

    assert outcomes[0] == "approved"
    assert outcomes[1] == "refused: Guarantees for H100 would total 40 of 32 GPUs (overcommit ratio 1)."
    assert Quota.objects.count() == 1 and Quota.objects.get().guaranteed == 20
    assert sorted(QuotaRequest.objects.values_list("state", flat=True)) == ["approved", "pending"]
    assert AuditEvent.objects.filter(kind=AuditEvent.Kind.QUOTA_REQUEST_APPROVED).count() == 1


@pytest.mark.django_db(transaction=True)
def test_concurrent_approvals_of_the_same_request_decide_it_once(world: World) -> None:
    FleetPolicyFactory()
    request = QuotaRequestFactory(team=world.team, accelerator_type=world.h100, requested_by=world.lead, guaranteed=8)

    outcomes = _approve_together(world.admin, [request.pk, request.pk])

    assert outcomes == ["approved", "refused: This request is already approved."]
    assert AuditEvent.objects.filter(kind=AuditEvent.Kind.QUOTA_REQUEST_APPROVED).count() == 1
