"""Writing a team's quota: the one place a quota row changes, whether a fleet admin sets it
directly (as a Kueue ClusterQueue is edited) or approves a lead's request.

Every write holds the fleet policy's row lock for its transaction, so guarantees are checked
against fleet capacity one write at a time: two writes cannot each see room only one may take.
A quota set to no guarantee and no limits keeps its row rather than deleting it. The scheduler
reads a missing row and such a row alike (no guarantee, unlimited borrowing), and keeping it
leaves one object for the audit trail to name and one path through the code.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import Sum
from django.urls import reverse

from fleet.models import AcceleratorType, Node
from tenants.models import AuditEvent, FleetPolicy, Membership, NoticeKind, Quota, Team
from tenants.permissions import is_fleet_admin
from tenants.services.audit import audit_record, snapshot_fields
from tenants.services.notifications import notice_deliver

QUOTA_FIELDS = ["guaranteed", "borrow_limit", "lend_limit"]
REASON_MAX_CHARS = 2000


def fleet_policy_lock() -> FleetPolicy:
    """The policy row, locked until the current transaction ends (it serialises quota writes on
    PostgreSQL; SQLite's IMMEDIATE transactions already do)."""
    policy, _ = FleetPolicy.objects.select_for_update().get_or_create(pk=FleetPolicy.SINGLETON_ID)
    return policy


def quota_capacity_check(
    *, team: Team, accelerator_type: AcceleratorType, guaranteed: int, current: int, policy: FleetPolicy
) -> None:
    """Refuse a guarantee that would take the type's guarantees past fleet capacity × the
    policy's overcommit ratio. Shrinking or keeping a guarantee never needs room."""
    if guaranteed <= current:
        return
    others = Quota.objects.filter(accelerator_type=accelerator_type).exclude(team=team)
    total = (others.aggregate(total=Sum("guaranteed"))["total"] or 0) + guaranteed
    fleet_gpus = Node.objects.filter(accelerator_type=accelerator_type).aggregate(gpus=Sum("gpus"))["gpus"] or 0
    ratio = policy.guarantee_overcommit_ratio
    if total > int(fleet_gpus * ratio):
        raise ValidationError(
            f"Guarantees for {accelerator_type.name} would total {total} of {fleet_gpus} GPUs "
            f"(overcommit ratio {ratio:g})."
        )


def quota_write(
    *,
    team: Team,
    accelerator_type: AcceleratorType,
    guaranteed: int,
    borrow_limit: int | None,
    lend_limit: int | None,
    policy: FleetPolicy,
) -> tuple[Quota, dict[str, object] | None]:
    """Check and write the quota inside the caller's transaction, which holds ``policy`` from
    ``fleet_policy_lock()``; returns it with its fields as they were (``None`` when the team had
    no row for the type)."""
    _check_values(guaranteed=guaranteed, borrow_limit=borrow_limit, lend_limit=lend_limit)
    quota = Quota.objects.filter(team=team, accelerator_type=accelerator_type).first()
    current = quota.guaranteed if quota else 0
    quota_capacity_check(
        team=team, accelerator_type=accelerator_type, guaranteed=guaranteed, current=current, policy=policy
    )
    before = snapshot_fields(quota, QUOTA_FIELDS) if quota else None
    if quota is None:
        quota = Quota(team=team, accelerator_type=accelerator_type)
    quota.guaranteed, quota.borrow_limit, quota.lend_limit = guaranteed, borrow_limit, lend_limit
    quota.save()
    return quota, before


def quota_set(
    *,
    admin: User,
    team: Team,
    accelerator_type: AcceleratorType,
    guaranteed: int,
    borrow_limit: int | None,
    lend_limit: int | None,
    reason: str,
) -> Quota:
    """A fleet admin sets a team's quota for one accelerator type, audited, and the team's leads
    are told. ``None`` limits mean unlimited. The live cycle reads it from its next tick."""
    if not is_fleet_admin(admin):
        raise PermissionDenied("Only fleet admins set quotas.")
    reason = reason.strip()
    if not reason:
        raise ValidationError({"reason": "Say why the quota changes."})
    if len(reason) > REASON_MAX_CHARS:
        raise ValidationError({"reason": f"Keep the reason within {REASON_MAX_CHARS} characters."})
    with transaction.atomic():
        quota, before = quota_write(
            team=team,
            accelerator_type=accelerator_type,
            guaranteed=guaranteed,
            borrow_limit=borrow_limit,
            lend_limit=lend_limit,
            policy=fleet_policy_lock(),
        )
        audit_record(
            actor=admin,
            kind=AuditEvent.Kind.QUOTA_SET,
            team=team,
            object_repr=f"{team.name} · {accelerator_type.name} quota: {reason}",
            before=before,
            after=snapshot_fields(quota, QUOTA_FIELDS),
        )
        _tell_leads(quota, reason=reason)
    return quota


def _check_values(*, guaranteed: int, borrow_limit: int | None, lend_limit: int | None) -> None:
    errors = {
        name: "Must be zero or more."
        for name, value in (("guaranteed", guaranteed), ("borrow_limit", borrow_limit), ("lend_limit", lend_limit))
        if value is not None and value < 0
    }
    if errors:
        raise ValidationError(errors)


def _limit_text(value: int | None) -> str:
    return "unlimited" if value is None else str(value)


def _tell_leads(quota: Quota, *, reason: str) -> None:
    team, type_name = quota.team, quota.accelerator_type.name
    message = (
        f"A fleet admin set {team.name}'s {type_name} quota to {quota.guaranteed} guaranteed GPUs "
        f"(borrow limit {_limit_text(quota.borrow_limit)}, lend limit {_limit_text(quota.lend_limit)}). "
        f"Reason: {reason}"
    )
    url = reverse("tenants:team_detail", kwargs={"slug": team.slug})
    leads = (
        get_user_model()
        .objects.filter(memberships__team=team, memberships__role=Membership.Role.LEAD, is_active=True)
        .order_by("pk")
    )
    for lead in leads:
        notice_deliver(
            user=lead, kind=NoticeKind.QUOTA, message=message, url=url, subject=f"[Fleetline] {team.name} quota changed"
        )
