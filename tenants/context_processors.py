"""Navigation context: the user's global roles and unread notice count, computed only when a
template actually reads them (``tenants_nav.is_fleet_admin``, ``tenants_nav.unread_count``)."""

from __future__ import annotations

from functools import cached_property

from django.contrib.auth.models import AnonymousUser, User
from django.http import HttpRequest

from tenants import permissions, selectors


class TenantsNav:
    def __init__(self, user: User | AnonymousUser) -> None:
        self._user = user

    @cached_property
    def is_fleet_admin(self) -> bool:
        return permissions.is_fleet_admin(self._user)

    @cached_property
    def is_finance(self) -> bool:
        return permissions.is_finance(self._user)

    @cached_property
    def unread_count(self) -> int:
        return selectors.unread_notification_count(user=self._user)


def tenants_nav(request: HttpRequest) -> dict[str, TenantsNav]:
    return {"tenants_nav": TenantsNav(getattr(request, "user", AnonymousUser()))}
