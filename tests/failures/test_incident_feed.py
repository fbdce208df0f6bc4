"""Incidents reach the browser: detection is pushed to the fleet group, through the websocket."""

from __future__ import annotations

import os

import pytest

if "DJANGO_SETTINGS_MODULE" not in os.environ:  # the pure run (-p no:django) skips this module
    pytest.skip("needs Django", allow_module_level=True)

from channels.db import database_sync_to_async  # noqa: E402
from channels.testing import WebsocketCommunicator  # noqa: E402

from portal.consumers import FleetConsumer  # noqa: E402
from scheduling.cycle.failures import node_kill  # noqa: E402
from scheduling.models import FleetClock, Node  # noqa: E402
from tests.factories import UserFactory  # noqa: E402
from tests.scheduling.conftest import Fleet, build_fleet  # noqa: E402

pytestmark = pytest.mark.django_db(transaction=True)


async def _next_incident(communicator: WebsocketCommunicator) -> dict[str, object]:
    while True:
        message = await communicator.receive_json_from(timeout=10)
        if message["kind"] == "incident" and message.get("detected_at") is not None:
            return message


async def test_a_detected_node_failure_is_pushed_live_to_every_logged_in_browser() -> None:
    fleet: Fleet = await database_sync_to_async(build_fleet)()
    user = await database_sync_to_async(UserFactory)()
    communicator = WebsocketCommunicator(FleetConsumer.as_asgi(), "/ws/fleet/")
    communicator.scope["user"] = user
    connected, _ = await communicator.connect(timeout=5)
    assert connected

    victim = await database_sync_to_async(Node.objects.order_by("id").first)()
    now = await database_sync_to_async(lambda: FleetClock.objects.get().sim_now_s)()
    await database_sync_to_async(node_kill)(node=victim, sim_now_s=now)
    for _ in range(7):  # three missed 10 s heartbeats at 5 fleet seconds per tick
        await database_sync_to_async(fleet.tick)(speed=5.0)

    message = await _next_incident(communicator)
    assert message["node"] == victim.name
    assert message["incident"] == "dead"
    await communicator.disconnect()
