"""The operator's map from an identity provider's groups to Fleetline's roles and team memberships
(``FLEETLINE_OIDC_GROUP_MAP``), and what a given set of groups grants under it.

Syntax: comma-separated entries ``GROUP=TARGET``, where TARGET is one of

    role:admin               fleet admin
    role:finance             finance
    team:SLUG                member of the team with that slug
    team:SLUG:member         the same
    team:SLUG:lead           lead of the team

for example ``ml-admins=role:admin,finance=role:finance,vision-team=team:vision:lead``. A group
may appear in several entries, and several groups may grant the same thing (the highest team role
held wins). Only what the map names is managed: a role or a team that no entry names is left as
it is at every login; one it names follows the groups exactly (granted while a group that grants it
is held, taken away once none is).

Pure: no database, so the settings can check the map when the process starts.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from tenants.roles import FINANCE, FLEET_ADMIN

# The map's role names and the Django groups that hold each role.
ROLE_GROUPS: Mapping[str, str] = {"admin": FLEET_ADMIN, "finance": FINANCE}
TEAM_ROLES = ("member", "lead")  # lowest first: a user granted both is a lead
_SLUG = re.compile(r"^[-a-zA-Z0-9_]+$")


class GroupMapError(ValueError):
    """The map does not parse; the message names the entry and what is wrong with it."""


@dataclass(frozen=True, slots=True)
class MappedAccess:
    """What a user's groups grant, for every role and team the map names: ``roles[name]`` is
    whether the role is held; ``teams[slug]`` the team role held, or None for no membership."""

    roles: Mapping[str, bool]
    teams: Mapping[str, str | None]


@dataclass(frozen=True, slots=True)
class GroupMap:
    """Role name -> the groups granting it; team slug -> (group, team role) pairs."""

    roles: Mapping[str, frozenset[str]] = field(default_factory=dict)
    teams: Mapping[str, tuple[tuple[str, str], ...]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.roles or self.teams)

    def access_for(self, groups: Iterable[str]) -> MappedAccess:
        held = frozenset(groups)
        roles = {role: bool(granting & held) for role, granting in self.roles.items()}
        teams: dict[str, str | None] = {}
        for slug, pairs in self.teams.items():
            granted = [team_role for group, team_role in pairs if group in held]
            teams[slug] = max(granted, key=TEAM_ROLES.index) if granted else None
        return MappedAccess(roles=roles, teams=teams)


def _target_error(entry: str, message: str) -> GroupMapError:
    return GroupMapError(
        f"FLEETLINE_OIDC_GROUP_MAP entry {entry!r}: {message}. Each entry is GROUP=TARGET with TARGET "
        "role:admin, role:finance, team:SLUG, team:SLUG:member or team:SLUG:lead, entries separated by commas."
    )


def group_map_parse(text: str) -> GroupMap:
    """Parse the map; an empty text is an empty map. Raises `GroupMapError` on the first bad entry."""
    roles: dict[str, set[str]] = {}
    teams: dict[str, dict[tuple[str, str], None]] = {}
    for raw in text.split(","):
        entry = raw.strip()
        if not entry:
            continue
        group, equals, target = (part.strip() for part in entry.partition("="))
        if not equals or not group or not target:
            raise _target_error(entry, "expected GROUP=TARGET")
        kind, _, rest = target.partition(":")
        if kind == "role":
            if rest not in ROLE_GROUPS:
                raise _target_error(entry, f"unknown role {rest!r} (roles are {', '.join(ROLE_GROUPS)})")
            roles.setdefault(rest, set()).add(group)
        elif kind == "team":
            slug, _, team_role = rest.partition(":")
            team_role = team_role or "member"
            if not _SLUG.match(slug):
                raise _target_error(entry, f"{slug!r} is not a team slug")
            if team_role not in TEAM_ROLES:
                raise _target_error(entry, f"unknown team role {team_role!r} (member or lead)")
            teams.setdefault(slug, {})[(group, team_role)] = None
        else:
            raise _target_error(entry, f"unknown target {target!r}")
    return GroupMap(
        roles={role: frozenset(groups) for role, groups in roles.items()},
        teams={slug: tuple(pairs) for slug, pairs in teams.items()},
    )
