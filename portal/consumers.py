"""Websocket consumers: forward fleet-wide and per-team events to logged-in users."""

from __future__ import annotations

from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from portal.groups import ALL_JOBS_GROUP, FLEET_GROUP, team_group
from tenants.permissions import is_fleet_admin
from tenants.selectors import team_ids_for_user

# Close code for "not authenticated" (4000-4999 are free for applications).
CLOSE_UNAUTHENTICATED = 4401


class FleetConsumer(AsyncJsonWebsocketConsumer):
    """Joins the fleet group and the groups of the user's own teams (admins: every team's
    job events), then forwards events."""

    groups_joined: list[str]

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        self.groups_joined = await database_sync_to_async(_groups_for)(user)
        for group in self.groups_joined:
            await self.channel_layer.group_add(group, self.channel_name)
        await self.accept()

    async def disconnect(self, code: int) -> None:
        for group in getattr(self, "groups_joined", []):
            await self.channel_layer.group_discard(group, self.channel_name)

    async def fleet_event(self, event: dict[str, Any]) -> None:
        await self.send_json(event["payload"])


def _groups_for(user: Any) -> list[str]:
    if is_fleet_admin(user):
        return [FLEET_GROUP, ALL_JOBS_GROUP]
    return [FLEET_GROUP, *(team_group(t) for t in team_ids_for_user(user=user))]
