"""Write-side actions for the fleet and its live feed."""

from __future__ import annotations

import dataclasses
from typing import Any

import redis
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.utils import timezone

from portal.groups import FLEET_GROUP
from scheduling.selectors import fleet_summary

HEARTBEAT_SEQUENCE_KEY = "fleetline:heartbeat:seq"


def fleet_event_publish(*, group: str, payload: dict[str, Any]) -> None:
    """Send one event to every websocket in ``group``. Call it outside open transactions."""
    layer = get_channel_layer()
    if layer is None:
        return
    async_to_sync(layer.group_send)(group, {"type": "fleet.event", "payload": payload})


def fleet_heartbeat_publish() -> dict[str, Any]:
    """Publish the fleet's heartbeat (a sequence number and its size) to the fleet group."""
    seq = int(redis.Redis.from_url(settings.REDIS_URL).incr(HEARTBEAT_SEQUENCE_KEY))
    payload = {
        "kind": "heartbeat",
        "seq": seq,
        "sent_at": timezone.now().isoformat(),
        **dataclasses.asdict(fleet_summary()),
    }
    fleet_event_publish(group=FLEET_GROUP, payload=payload)
    return payload
