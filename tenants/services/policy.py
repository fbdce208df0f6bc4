"""Admin-defined priority classes and the fleet policy row; every save is audited."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction

from scheduling.engine import policy_settings
from tenants.models import AuditEvent, FleetPolicy, PriorityClass
from tenants.permissions import is_fleet_admin
from tenants.services.audit import audit_record, snapshot_fields

PRIORITY_CLASS_FIELDS = ["name", "value", "kind", "preemptible", "may_preempt"]
# The stored settings, as declared (`scheduling.engine.policy_settings`): what an update may change.
POLICY_FIELDS = [knob.name for knob in policy_settings.STORED]


def priority_class_save(
    *,
    actor: User | None,
    priority_class_id: int | None = None,
    name: str,
    value: int,
    kind: str,
    preemptible: bool,
    may_preempt: bool,
) -> PriorityClass:
    """Create a priority class, or update the one with ``priority_class_id``."""
    if actor is not None and not is_fleet_admin(actor):
        raise PermissionDenied("Only fleet admins change priority classes.")
    with transaction.atomic():
        if priority_class_id is None:
            priority_class, before = PriorityClass(), None
        else:
            priority_class = PriorityClass.objects.select_for_update().get(pk=priority_class_id)
            before = snapshot_fields(priority_class, PRIORITY_CLASS_FIELDS)
        priority_class.name, priority_class.value, priority_class.kind = name, value, kind
        priority_class.preemptible, priority_class.may_preempt = preemptible, may_preempt
        priority_class.full_clean()
        priority_class.save()
        audit_record(
            actor=actor,
            kind=AuditEvent.Kind.PRIORITY_CLASS_SAVED,
            object_repr=f"Priority class {priority_class}",
            before=before,
            after=snapshot_fields(priority_class, PRIORITY_CLASS_FIELDS),
        )
    return priority_class


def fleet_policy_update(*, actor: User | None, changes: dict[str, Any]) -> FleetPolicy:
    """Apply field changes to the policy row; the live cycle picks them up on its next run."""
    if actor is not None and not is_fleet_admin(actor):
        raise PermissionDenied("Only fleet admins change the fleet policy.")
    unknown = set(changes) - set(POLICY_FIELDS)
    if unknown:
        raise ValidationError(f"Unknown policy fields: {', '.join(sorted(unknown))}.")
    with transaction.atomic():
        policy, _ = FleetPolicy.objects.select_for_update().get_or_create(pk=FleetPolicy.SINGLETON_ID)
        before = snapshot_fields(policy, POLICY_FIELDS)
        for name, value in changes.items():
            setattr(policy, name, value)
        policy.full_clean()
        policy.save()
        after = snapshot_fields(policy, POLICY_FIELDS)
        changed = [name for name in POLICY_FIELDS if before[name] != after[name]]
        audit_record(
            actor=actor,
            kind=AuditEvent.Kind.FLEET_POLICY_UPDATED,
            object_repr="Fleet policy: " + (", ".join(changed) or "no change"),
            before={name: before[name] for name in changed},
            after={name: after[name] for name in changed},
        )
    return policy
