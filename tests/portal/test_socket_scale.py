"""Many fleet websockets opening and closing at once, and sockets left idle, over the real Redis
channel layer: every socket leaves its groups without error however many close together, the
last one closes promptly, and an idle socket stays up."""

from __future__ import annotations

import asyncio
import time
from http.cookies import SimpleCookie

import pytest
import redis.asyncio as redis
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.test import Client

from core.groups import FLEET_GROUP, team_group
from portal.asgi import application
from tests.factories import MembershipFactory

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("children_disconnected")]
ORIGIN = (b"origin", b"http://127.0.0.1")
SOCKETS = 200


def _session_cookie(user: object) -> tuple[bytes, bytes]:
    client = Client()
    client.force_login(user)
    cookie = SimpleCookie()
    cookie[settings.SESSION_COOKIE_NAME] = client.cookies[settings.SESSION_COOKIE_NAME].value
    return (b"cookie", cookie.output(header="", sep="; ").strip().encode())


def _group_key(group: str) -> str:
    return f"{settings.CHANNEL_LAYERS['default']['CONFIG']['prefix']}:group:{group}"


async def _members(client: redis.Redis, group: str) -> int:
    return int(await client.zcard(_group_key(group)))


async def test_two_hundred_sockets_closing_at_once_all_leave_their_groups_without_errors() -> None:
    membership = await database_sync_to_async(MembershipFactory)()
    cookie = await database_sync_to_async(_session_cookie)(membership.user)
    client = redis.Redis.from_url(settings.REDIS_URL)
    # Team ids start again with each test database: an earlier run's members are not ours.
    await client.delete(_group_key(team_group(membership.team_id)))
    fleet_before = await _members(client, FLEET_GROUP)
    sockets = [WebsocketCommunicator(application, "/ws/fleet/", headers=[ORIGIN, cookie]) for _ in range(SOCKETS)]
    opened = await asyncio.gather(*(socket.connect(timeout=60) for socket in sockets))
    assert all(connected for connected, _ in opened)
    assert await _members(client, team_group(membership.team_id)) == SOCKETS
    assert await _members(client, FLEET_GROUP) == fleet_before + SOCKETS

    started = time.monotonic()
    closed = await asyncio.gather(*(socket.disconnect(timeout=30) for socket in sockets), return_exceptions=True)
    closing_s = time.monotonic() - started

    assert [error for error in closed if error is not None] == []
    assert await _members(client, team_group(membership.team_id)) == 0
    assert await _members(client, FLEET_GROUP) == fleet_before
    # The last socket out used to wait for a message that never came (cut off at the timeout).
    assert closing_s < 10
    await client.aclose()


async def test_a_socket_idle_for_longer_than_a_redis_read_timeout_still_receives_the_next_event() -> None:
    membership = await database_sync_to_async(MembershipFactory)()
    cookie = await database_sync_to_async(_session_cookie)(membership.user)
    socket = WebsocketCommunicator(application, "/ws/fleet/", headers=[ORIGIN, cookie])
    connected, _ = await socket.connect(timeout=10)
    assert connected

    assert await socket.receive_nothing(timeout=6.5, interval=0.5)
    payload = {"kind": "heartbeat", "seq": 1}
    await get_channel_layer().group_send(FLEET_GROUP, {"type": "fleet.event", "payload": payload})

    assert await socket.receive_json_from(timeout=5) == payload
    await socket.disconnect(timeout=10)
