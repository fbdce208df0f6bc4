"""What an open fleet websocket may read: decided when it opens, applied to every team event it
forwards, and decided again whenever the user's access may have changed (a membership or a role
changed, the session ended, or simply some minutes passed)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import import_module
from typing import Any

from django.conf import settings
from django.contrib import auth
from django.contrib.auth.models import AnonymousUser, User
from django.http import HttpRequest

from core.groups import ALL_JOBS_GROUP, FLEET_GROUP, team_group, user_group
from core.socket_events import BATCH_KINDS
from tenants.permissions import is_fleet_admin
from tenants.selectors import team_ids_for_user


@dataclass(frozen=True, slots=True)
class SocketAccess:
    """One user's right to live events: fleet admins read every team's jobs, everyone else
    their own teams' jobs."""

    user_id: int
    admin: bool
    team_ids: frozenset[int]

    def may_read_team(self, team_id: int) -> bool:
        return self.admin or team_id in self.team_ids

    def may_read_teams(self, team_ids: Iterable[int]) -> bool:
        return self.admin or self.team_ids.issuperset(team_ids)

    @property
    def groups(self) -> frozenset[str]:
        """The channel-layer groups a socket with this access belongs to."""
        jobs = {ALL_JOBS_GROUP} if self.admin else {team_group(team_id) for team_id in self.team_ids}
        return frozenset({FLEET_GROUP, user_group(self.user_id), *jobs})


def socket_access_for(*, user: User) -> SocketAccess:
    return SocketAccess(
        user_id=int(user.pk),
        admin=is_fleet_admin(user),
        team_ids=frozenset(team_ids_for_user(user=user)),
    )


def socket_access_for_session(*, session_key: str | None, user_id: int) -> SocketAccess | None:
    """The access of the session a socket was opened with, as it stands now; ``None`` once that
    session no longer logs ``user_id`` in (logged out, expired, password changed, user
    deactivated or deleted). Django's own rule decides, as for the next page the user opens."""
    if not session_key:
        return None
    request = HttpRequest()
    request.session = import_module(settings.SESSION_ENGINE).SessionStore(session_key=session_key)
    user: User | AnonymousUser = auth.get_user(request)
    if not user.is_authenticated or user.pk != user_id:
        return None
    return socket_access_for(user=user)


def socket_access_for_token(*, token_digest: str, user_id: int) -> SocketAccess | None:
    """The access of the API token a socket was opened with; ``None`` once it is revoked."""
    from api.socket_auth import socket_token_user  # the API app builds on this one

    user = socket_token_user(token_digest=token_digest, user_id=user_id)
    return None if user is None else socket_access_for(user=user)


def socket_payload_for(*, access: SocketAccess, payload: dict[str, Any]) -> dict[str, Any] | None:
    """The part of an event this socket may forward, or ``None`` for nothing. A batch of job
    changes (or of changed waits) keeps the jobs of teams the user may read; any other event that
    names a team goes through only if the user may read that team; fleet-wide events always go
    through."""
    if payload.get("kind") in BATCH_KINDS:
        jobs = [job for job in payload.get("jobs", []) if access.may_read_team(job["team"])]
        return {**payload, "jobs": jobs} if jobs else None
    team_id = payload.get("team")
    if team_id is not None and not access.may_read_team(team_id):
        return None
    return payload


def socket_text_for(*, access: SocketAccess, event: dict[str, Any]) -> str | None:
    """The text a socket sends its page for a ``fleet.event`` message, or ``None`` for nothing:
    the text encoded once at publishing when the user may read every team the event names (as
    every socket of the group it went to may), else the part the user may read
    (`socket_payload_for`), encoded for this socket alone."""
    text, teams = event.get("text"), event.get("teams")
    if text is not None and teams is not None and access.may_read_teams(teams):
        return str(text)
    payload = socket_payload_for(access=access, payload=event["payload"])
    return None if payload is None else json.dumps(payload)
