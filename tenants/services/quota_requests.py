"""A team lead asks for quota; a fleet admin approves or rejects; the lead may withdraw.

A fleet admin who is also a lead does not approve their own request while another fleet admin
can: only when they are the fleet's one admin is it approved, and marked self-approved (on the
request, and as its own kind in the audit log).

Every state change is a guarded update on ``state=pending``, so a request is decided once even
when two admins click at the same moment.
"""

from __future__ import annotations

import logging

from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone

from fleet.models import AcceleratorType
from tenants.models import AuditEvent, NoticeKind, Quota, QuotaRequest, Team
from tenants.permissions import can_manage_team_quota, is_fleet_admin
from tenants.roles import FLEET_ADMIN
from tenants.services.audit import audit_record, snapshot_fields
from tenants.services.notifications import notice_deliver
from tenants.services.quotas import QUOTA_FIELDS, fleet_policy_lock, quota_write

logger = logging.getLogger(__name__)

REQUEST_FIELDS = ["state", "guaranteed", "borrow_limit", "lend_limit", "decision_note"]
Pending = QuotaRequest.State.PENDING


def quota_request_submit(
    *,
    user: User,
    team: Team,
    accelerator_type: AcceleratorType,
    guaranteed: int,
    borrow_limit: int | None,
    lend_limit: int | None,
    justification: str,
) -> QuotaRequest:
    """File a request for the team; one pending request per team and accelerator type."""
    if not can_manage_team_quota(user, team):
        raise PermissionDenied("Only the team's leads request quota.")
    duplicate = ValidationError(
        {"accelerator_type": f"{team.name} already has a pending request for {accelerator_type.name}."}
    )
    if QuotaRequest.objects.filter(team=team, accelerator_type=accelerator_type, state=Pending).exists():
        raise duplicate
    try:
        with transaction.atomic():
            request = QuotaRequest.objects.create(
                team=team,
                accelerator_type=accelerator_type,
                guaranteed=guaranteed,
                borrow_limit=borrow_limit,
                lend_limit=lend_limit,
                justification=justification.strip(),
                requested_by=user,
            )
            audit_record(
                actor=user,
                kind=AuditEvent.Kind.QUOTA_REQUEST_SUBMITTED,
                team=team,
                object_repr=str(request),
                after=snapshot_fields(request, REQUEST_FIELDS),
            )
    except IntegrityError:
        # Two submissions raced past the check above; the partial unique index kept one.
        raise duplicate from None
    return request


def quota_request_withdraw(*, user: User, quota_request_id: int) -> QuotaRequest:
    with transaction.atomic():
        request = QuotaRequest.objects.select_related("team").get(pk=quota_request_id)
        if not can_manage_team_quota(user, request.team):
            raise PermissionDenied("Only the team's leads withdraw its requests.")
        _decide(request, state=QuotaRequest.State.WITHDRAWN, user=user, note="")
        audit_record(
            actor=user,
            kind=AuditEvent.Kind.QUOTA_REQUEST_WITHDRAWN,
            team=request.team,
            object_repr=str(request),
            before={"state": Pending},
            after={"state": request.state},
        )
    return request


def quota_request_approve(*, admin: User, quota_request_id: int, note: str = "") -> Quota:
    """Approve and apply a request, unless guarantees would exceed fleet capacity × overcommit.

    The policy row's lock is taken before the request is read, so a second approval of the same
    request waits and then finds it decided. The admin who filed the request approves it only when
    no other fleet admin could (`quota_request_self_approval`).
    """
    _require_admin(admin)
    with transaction.atomic():
        policy = fleet_policy_lock()
        request = _pending_request(quota_request_id)
        self_approved = quota_request_self_approval(admin=admin, request=request)
        quota, before = quota_write(
            team=request.team,
            accelerator_type=request.accelerator_type,
            guaranteed=request.guaranteed,
            borrow_limit=request.borrow_limit,
            lend_limit=request.lend_limit,
            policy=policy,
        )
        _decide(request, state=QuotaRequest.State.APPROVED, user=admin, note=note, self_approved=self_approved)
        audit_record(
            actor=admin,
            kind=AuditEvent.Kind.QUOTA_REQUEST_SELF_APPROVED
            if self_approved
            else AuditEvent.Kind.QUOTA_REQUEST_APPROVED,
            team=request.team,
            object_repr=f"{request.team.name} · {request.accelerator_type.name} quota",
            before=before,
            after={**snapshot_fields(quota, QUOTA_FIELDS), **({"self_approved": True} if self_approved else {})},
        )
        _tell_requester(request, verb="approved")
    return quota


def quota_request_reject(*, admin: User, quota_request_id: int, note: str) -> QuotaRequest:
    _require_admin(admin)
    if not note.strip():
        raise ValidationError({"note": "Say why the request is rejected."})
    with transaction.atomic():
        request = _pending_request(quota_request_id)
        _decide(request, state=QuotaRequest.State.REJECTED, user=admin, note=note)
        audit_record(
            actor=admin,
            kind=AuditEvent.Kind.QUOTA_REQUEST_REJECTED,
            team=request.team,
            object_repr=str(request),
            before={"state": Pending},
            after={"state": request.state, "decision_note": request.decision_note},
        )
        _tell_requester(request, verb="rejected")
    return request


def quota_request_self_approval(*, admin: User, request: QuotaRequest) -> bool:
    """Whether ``admin`` approving ``request`` approves their own request; refused (PermissionDenied)
    while another active fleet admin exists to decide it. Rejecting one's own request is allowed:
    it grants nothing, like withdrawing it."""
    if request.requested_by_id != admin.pk:
        return False
    others = User.objects.filter(Q(is_superuser=True) | Q(groups__name=FLEET_ADMIN), is_active=True).exclude(
        pk=admin.pk
    )
    if others.exists():
        raise PermissionDenied("You filed this request: another fleet admin must approve it.")
    return True


def _require_admin(user: User) -> None:
    if not is_fleet_admin(user):
        raise PermissionDenied("Only fleet admins decide quota requests.")


def _pending_request(quota_request_id: int) -> QuotaRequest:
    request = (
        QuotaRequest.objects.select_related("team", "accelerator_type", "requested_by")
        .filter(pk=quota_request_id)
        .first()
    )
    if request is None:
        raise QuotaRequest.DoesNotExist(f"No quota request {quota_request_id}.")
    if request.state != Pending:
        raise ValidationError(f"This request is already {request.get_state_display().lower()}.")
    return request


def _decide(request: QuotaRequest, *, state: str, user: User, note: str, self_approved: bool = False) -> None:
    """Move a pending request to ``state``; refuse if someone else decided it first."""
    now = timezone.now()
    changed = QuotaRequest.objects.filter(pk=request.pk, state=Pending).update(
        state=state, decided_by=user, decision_note=note.strip(), decided_at=now, self_approved=self_approved
    )
    if changed != 1:
        raise ValidationError("This request is no longer pending.")
    request.state, request.decided_by, request.decision_note, request.decided_at = state, user, note.strip(), now
    request.self_approved = self_approved


def _tell_requester(request: QuotaRequest, *, verb: str) -> None:
    url = reverse("tenants:team_detail", kwargs={"slug": request.team.slug})
    message = (
        f"Your request for {request.guaranteed} guaranteed {request.accelerator_type.name} GPUs "
        f"for {request.team.name} was {verb}."
    )
    if request.decision_note:
        message += f" Note: {request.decision_note}"
    notice_deliver(
        user=request.requested_by,
        kind=NoticeKind.QUOTA,
        message=message,
        url=url,
        subject=f"[Fleetline] Quota request {verb}",
    )
