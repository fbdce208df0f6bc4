"""Who belongs to which team. Fleet admins manage every membership; a team's leads add and
remove its members (not its leads). Every change is audited, and reaches the user's open
websockets once it commits: they re-check which teams' events they may read and leave the others."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.db import transaction

from tenants.models import AuditEvent, Membership, Team
from tenants.permissions import is_fleet_admin, team_role
from tenants.services.audit import audit_record
from tenants.signals import memberships_changed


def _require_admin(actor: User | None) -> None:
    if actor is not None and not is_fleet_admin(actor):
        raise PermissionDenied("Only fleet admins change team memberships.")


def _require_may_manage(actor: User | None, team: Team, role: str) -> None:
    """The system (no actor) and fleet admins manage anyone; a lead manages the team's members."""
    if actor is None or is_fleet_admin(actor):
        return
    if team_role(actor, team) == Membership.Role.LEAD and role == Membership.Role.MEMBER:
        return
    raise PermissionDenied("Only fleet admins and the team's leads change its members; only fleet admins manage leads.")


def _picture(membership: Membership, username: str) -> dict[str, str]:
    return {"user": username, "role": membership.role}


def membership_add(
    *, actor: User | None, team: Team, user: User, role: str = Membership.Role.MEMBER, source: str = ""
) -> Membership:
    _require_may_manage(actor, team, role)
    with transaction.atomic():
        membership = Membership(team=team, user=user, role=role)
        membership.full_clean()
        membership.save()
        audit_record(
            actor=actor,
            kind=AuditEvent.Kind.MEMBER_ADDED,
            object_repr=f"{user.get_username()} in {team.name}",
            team=team,
            after=_picture(membership, user.get_username()),
            source=source,
        )
        memberships_changed.send(sender=Membership, user_ids=[user.pk])
    return membership


def membership_role_change(*, actor: User | None, membership_id: int, role: str, source: str = "") -> Membership:
    _require_admin(actor)
    with transaction.atomic():
        membership = (
            Membership.objects.select_for_update(of=("self",)).select_related("user", "team").get(pk=membership_id)
        )
        before = _picture(membership, membership.user.get_username())
        membership.role = role
        membership.full_clean()
        membership.save(update_fields=["role"])
        if before["role"] != role:
            audit_record(
                actor=actor,
                kind=AuditEvent.Kind.MEMBER_ROLE_CHANGED,
                object_repr=f"{before['user']} in {membership.team.name}",
                team=membership.team,
                before=before,
                after=_picture(membership, before["user"]),
                source=source,
            )
        memberships_changed.send(sender=Membership, user_ids=[membership.user_id])
    return membership


def membership_remove(*, actor: User | None, membership_id: int, source: str = "") -> None:
    """Take the user out of the team; their open sockets stop receiving its job events. ``source``
    names what made a change no person made (see `audit_record`)."""
    with transaction.atomic():
        membership = (
            Membership.objects.select_for_update(of=("self",))
            .select_related("user", "team")
            .filter(pk=membership_id)
            .first()
        )
        if membership is None:
            return
        _require_may_manage(actor, membership.team, membership.role)
        membership.delete()
        audit_record(
            actor=actor,
            kind=AuditEvent.Kind.MEMBER_REMOVED,
            object_repr=f"{membership.user.get_username()} in {membership.team.name}",
            team=membership.team,
            before=_picture(membership, membership.user.get_username()),
            source=source,
        )
        memberships_changed.send(sender=Membership, user_ids=[membership.user_id])
