"""Each web process sends its own sockets the fleet's heartbeat once a second, over the real Redis
channel layer but without a group message, a Celery worker or a tick: the heartbeat is made and
encoded once per beat for all of the process's sockets, tells the fleet's size, and is numbered
by the second it is sent in."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from http.cookies import SimpleCookie
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.test import Client

from portal import consumers
from portal.asgi import application
from scheduling.live import feed
from tests.factories import NodeFactory, UserFactory

pytestmark = pytest.mark.django_db(transaction=True)
ORIGIN = (b"origin", b"http://127.0.0.1")
SOCKETS = 3


def _session_cookie(user: object) -> tuple[bytes, bytes]:
    client = Client()
    client.force_login(user)
    cookie = SimpleCookie()
    cookie[settings.SESSION_COOKIE_NAME] = client.cookies[settings.SESSION_COOKIE_NAME].value
    return (b"cookie", cookie.output(header="", sep="; ").strip().encode())


@pytest.fixture
async def beats_made(monkeypatch: pytest.MonkeyPatch, settings: Any) -> AsyncIterator[list[dict[str, Any]]]:
    """Heartbeats on, each one the process makes recorded; the layer's beat stopped after."""
    settings.FLEET_SOCKET_HEARTBEAT_S = 1.0
    monkeypatch.setattr(feed, "_kept_summary", feed._KeptSummary())
    made: list[dict[str, Any]] = []

    async def recorded() -> dict[str, Any]:
        message = await feed.fleet_heartbeat_message()
        made.append(message)
        return message

    monkeypatch.setattr(consumers, "fleet_heartbeat_message", recorded)
    yield made
    get_channel_layer().beat_stop()


async def test_every_socket_of_a_process_gets_one_shared_heartbeat_a_second(beats_made: list[dict[str, Any]]) -> None:
    await database_sync_to_async(NodeFactory.create_batch)(3)
    user = await database_sync_to_async(UserFactory)()
    cookie = await database_sync_to_async(_session_cookie)(user)
    sockets = [WebsocketCommunicator(application, "/ws/fleet/", headers=[ORIGIN, cookie]) for _ in range(SOCKETS)]
    assert all(connected for connected, _ in await asyncio.gather(*(s.connect(timeout=10) for s in sockets)))

    heard = [[await socket.receive_json_from(timeout=3) for _ in range(2)] for socket in sockets]

    for beats in heard:
        assert [beat["kind"] for beat in beats] == ["heartbeat", "heartbeat"]
        assert beats[0]["nodes"] == 3 and beats[0]["gpus"] == 24 and beats[0]["v"] == 1
        assert beats[1]["seq"] > beats[0]["seq"]
    # One message made per beat for all the sockets, not one per socket: each socket forwards it.
    made = {message["payload"]["seq"]: message["payload"] for message in beats_made}
    assert all(beat == made[beat["seq"]] for beats in heard for beat in beats)
    assert len(beats_made) <= len({beat["seq"] for beats in heard for beat in beats}) + 1
    await asyncio.gather(*(socket.disconnect() for socket in sockets))


async def test_without_sockets_or_with_heartbeats_off_no_heartbeat_is_made(
    beats_made: list[dict[str, Any]], settings: Any
) -> None:
    settings.FLEET_SOCKET_HEARTBEAT_S = 0.0
    get_channel_layer().beat_stop()
    user = await database_sync_to_async(UserFactory)()
    cookie = await database_sync_to_async(_session_cookie)(user)
    socket = WebsocketCommunicator(application, "/ws/fleet/", headers=[ORIGIN, cookie])
    connected, _ = await socket.connect(timeout=10)
    assert connected

    assert await socket.receive_nothing(timeout=2.5, interval=0.5)
    assert beats_made == []
    await socket.disconnect()


def test_a_beat_interval_of_zero_is_refused() -> None:
    with pytest.raises(ValueError, match="above 0 seconds"):
        get_channel_layer().beat_set(feed.fleet_heartbeat_message, 0.0)
