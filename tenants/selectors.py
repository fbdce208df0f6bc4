"""Read-side queries for tenants. Every tenant-scoped selector takes ``user=`` or ``team=``."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

from tenants.models import Membership
from tenants.roles import FLEET_ADMIN


def team_ids_for_user(*, user: AbstractBaseUser | AnonymousUser) -> list[int]:
    """Ids of the teams whose live events the user may receive."""
    if not user.is_authenticated:
        return []
    return list(
        Membership.objects.filter(user=user).order_by("team_id").values_list("team_id", flat=True)
    )


def user_is_fleet_admin(*, user: AbstractBaseUser | AnonymousUser) -> bool:
    if not user.is_authenticated:
        return False
    return bool(user.is_superuser or user.groups.filter(name=FLEET_ADMIN).exists())
