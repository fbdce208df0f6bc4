"""Who may see and do what. Outsiders get 404s, never 403s, so that team names do not leak.

Global roles are Django groups (``tenants.roles``); team roles live on ``Membership``. The
answers are cached on the user object for the length of one request so that a page asks the
database once, whatever the template asks.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AnonymousUser, Group, User
from django.db.models import Exists, OuterRef, QuerySet
from django.http import Http404

from core.compiled_queries import CompiledQuery
from tenants.models import Membership, Team
from tenants.roles import FINANCE, FLEET_ADMIN

AnyUser = User | AnonymousUser


def group_names_of(user_id: int) -> QuerySet[Group, Any]:
    return Group.objects.filter(user__id=user_id).values("name")


def team_ids_of(user_id: int) -> QuerySet[Membership, Any]:
    return Membership.objects.filter(user_id=user_id).values("team_id")


# Pages ask both on most requests: their SQL is built once (`CompiledQuery`), not on each.
GROUP_NAMES = CompiledQuery(group_names_of, user_id=int)
TEAM_IDS = CompiledQuery(team_ids_of, user_id=int)


def _cached(user: AnyUser, attribute: str, query: CompiledQuery, column: str) -> frozenset[Any]:
    """``column`` of ``query``'s rows for the user (none when signed out), cached on the user
    object as ``attribute`` for the length of this request."""
    if not user.is_authenticated:
        return frozenset()
    cached = getattr(user, attribute, None)
    if cached is None:
        cached = frozenset(row[column] for row in query.rows(user_id=user.pk))
        setattr(user, attribute, cached)
    return cached


def _group_names(user: AnyUser) -> frozenset[str]:
    """The user's groups; or, where `roles_remember` was called, those of them that are roles."""
    return _cached(user, "_fleetline_groups", GROUP_NAMES, "name")


def member_team_ids(user: AnyUser) -> frozenset[int]:
    """The teams the user is a member of, cached for the request as the roles are."""
    return _cached(user, "_fleetline_team_ids", TEAM_IDS, "team_id")


ROLES = (FLEET_ADMIN, FINANCE)


def role_flags(user_ref: str) -> dict[str, Exists]:
    """Annotations saying which global roles the user at ``user_ref`` (a field path of the query's
    model) holds, so that a query already reading the user answers the role checks as well;
    `roles_remember` puts them where the checks look."""
    return {
        f"has_role_{i}": Exists(Group.objects.filter(user=OuterRef(user_ref), name=role))
        for i, role in enumerate(ROLES)
    }


def roles_remember(user: User, row: object) -> None:
    """The roles read with `role_flags` on ``row`` (a model instance, or a ``values()`` dict),
    cached on ``user`` for this request."""
    flags = row if isinstance(row, dict) else vars(row)
    user._fleetline_groups = frozenset(role for i, role in enumerate(ROLES) if flags[f"has_role_{i}"])  # type: ignore[attr-defined]


def is_fleet_admin(user: AnyUser) -> bool:
    if not user.is_authenticated:
        return False
    return bool(getattr(user, "is_superuser", False)) or FLEET_ADMIN in _group_names(user)


def is_finance(user: AnyUser) -> bool:
    return FINANCE in _group_names(user)


def team_role(user: AnyUser, team: Team) -> str | None:
    """The user's role in the team (``lead``/``member``), or ``None`` for non-members."""
    if not user.is_authenticated:
        return None
    return Membership.objects.filter(user_id=user.pk, team=team).values_list("role", flat=True).first()


def can_view_team(user: AnyUser, team: Team) -> bool:
    return is_fleet_admin(user) or team_role(user, team) is not None


def can_manage_team_quota(user: AnyUser, team: Team) -> bool:
    """Only a team's leads file and withdraw its quota requests."""
    return team_role(user, team) == Membership.Role.LEAD


def require_fleet_admin(user: AnyUser) -> None:
    if not is_fleet_admin(user):
        raise Http404("No such page.")
