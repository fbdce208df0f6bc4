"""The fleet-wide roles (fleet admin, finance), held as Django groups (``tenants.roles``). Every
grant and revocation is audited and reaches the user's open websockets once it commits: they
re-check what they may read."""

from __future__ import annotations

from django.contrib.auth.models import Group, User
from django.core.exceptions import PermissionDenied
from django.db import transaction

from tenants.models import AuditEvent
from tenants.permissions import ROLES, is_fleet_admin
from tenants.services.audit import audit_record
from tenants.signals import memberships_changed


def role_set(*, actor: User | None, user: User, role: str, held: bool, source: str = "") -> bool:
    """Grant (``held``) or revoke ``role`` for ``user``; True when that changed anything. The
    system (no actor, e.g. a single sign-on) and fleet admins set roles."""
    if role not in ROLES:
        raise ValueError(f"{role!r} is not a role; roles are {', '.join(ROLES)}")
    if actor is not None and not is_fleet_admin(actor):
        raise PermissionDenied("Only fleet admins grant and revoke roles.")
    with transaction.atomic():
        group, _ = Group.objects.get_or_create(name=role)
        if user.groups.filter(pk=group.pk).exists() == held:
            return False
        if held:
            user.groups.add(group)
        else:
            user.groups.remove(group)
        audit_record(
            actor=actor,
            kind=AuditEvent.Kind.ROLE_GRANTED if held else AuditEvent.Kind.ROLE_REVOKED,
            object_repr=f"{role} role of {user.get_username()}",
            before=None if held else {"user": user.get_username(), "role": role},
            after={"user": user.get_username(), "role": role} if held else None,
            source=source,
        )
        # The per-request role cache (``tenants.permissions``) no longer tells the truth.
        if hasattr(user, "_fleetline_groups"):
            del user._fleetline_groups
        memberships_changed.send(sender=Group, user_ids=[user.pk])
    return True
