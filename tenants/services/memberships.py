"""Who belongs to which team. Each change also reaches the user's open websockets once it
commits: they re-check which teams' events they may read and leave the others."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import PermissionDenied
from django.db import transaction

from portal.socket_events import socket_access_changed_publish
from tenants.models import Membership, Team
from tenants.permissions import is_fleet_admin


def _require_admin(actor: AbstractBaseUser | None) -> None:
    if actor is not None and not is_fleet_admin(actor):
        raise PermissionDenied("Only fleet admins change team memberships.")


def membership_add(
    *, actor: AbstractBaseUser | None, team: Team, user: AbstractBaseUser, role: str = Membership.Role.MEMBER
) -> Membership:
    _require_admin(actor)
    with transaction.atomic():
        membership = Membership(team=team, user=user, role=role)
        membership.full_clean()
        membership.save()
        socket_access_changed_publish(user_ids=[user.pk])
    return membership


def membership_role_change(*, actor: AbstractBaseUser | None, membership_id: int, role: str) -> Membership:
    _require_admin(actor)
    with transaction.atomic():
        membership = Membership.objects.select_for_update().get(pk=membership_id)
        membership.role = role
        membership.full_clean()
        membership.save(update_fields=["role"])
        socket_access_changed_publish(user_ids=[membership.user_id])
    return membership


def membership_remove(*, actor: AbstractBaseUser | None, membership_id: int) -> None:
    """Take the user out of the team; their open sockets stop receiving its job events."""
    _require_admin(actor)
    with transaction.atomic():
        membership = Membership.objects.select_for_update().filter(pk=membership_id).first()
        if membership is None:
            return
        membership.delete()
        socket_access_changed_publish(user_ids=[membership.user_id])
