"""The fleet websocket over the real Redis channel layer, through the full ASGI stack."""

from __future__ import annotations

from http.cookies import SimpleCookie

import pytest
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.test import Client

from core.groups import FLEET_GROUP, team_group
from core.live_events import live_event
from core.socket_events import EVENT_VERSION, fleet_event_message
from portal.asgi import application
from portal.consumers import CLOSE_UNAUTHENTICATED
from tests.factories import MembershipFactory, TeamFactory, UserFactory

pytestmark = pytest.mark.django_db(transaction=True)
ORIGIN = (b"origin", b"http://127.0.0.1")


def _session_cookie(user: object) -> tuple[bytes, bytes]:
    client = Client()
    client.force_login(user)
    cookie = SimpleCookie()
    cookie[settings.SESSION_COOKIE_NAME] = client.cookies[settings.SESSION_COOKIE_NAME].value
    return (b"cookie", cookie.output(header="", sep="; ").strip().encode())


async def _connect(headers: list[tuple[bytes, bytes]]) -> tuple[WebsocketCommunicator, bool, int]:
    communicator = WebsocketCommunicator(application, "/ws/fleet/", headers=headers)
    connected, code = await communicator.connect(timeout=5)
    return communicator, connected, code


async def test_it_rejects_anonymous_users() -> None:
    communicator, connected, code = await _connect([ORIGIN])
    assert not connected
    assert code == CLOSE_UNAUTHENTICATED


async def test_a_logged_in_user_receives_fleet_events() -> None:
    user = await database_sync_to_async(UserFactory)()
    cookie = await database_sync_to_async(_session_cookie)(user)
    communicator, connected, _ = await _connect([ORIGIN, cookie])
    assert connected

    payload = {"kind": "heartbeat", "seq": 7}
    await get_channel_layer().group_send(FLEET_GROUP, {"type": "fleet.event", "payload": payload})

    assert await communicator.receive_json_from(timeout=5) == payload
    await communicator.disconnect()


async def test_it_forwards_team_events_to_members_but_not_to_outsiders() -> None:
    team = await database_sync_to_async(TeamFactory)()
    member = await database_sync_to_async(MembershipFactory)(team=team)
    outsider = await database_sync_to_async(MembershipFactory)()
    member_ws, ok_member, _ = await _connect([ORIGIN, await database_sync_to_async(_session_cookie)(member.user)])
    outsider_ws, ok_outsider, _ = await _connect([ORIGIN, await database_sync_to_async(_session_cookie)(outsider.user)])
    assert ok_member and ok_outsider

    payload = {"kind": "job", "team": team.id}
    await get_channel_layer().group_send(team_group(team.id), {"type": "fleet.event", "payload": payload})

    assert await member_ws.receive_json_from(timeout=5) == payload
    assert await outsider_ws.receive_nothing(timeout=0.5)
    await member_ws.disconnect()
    await outsider_ws.disconnect()


async def test_it_rejects_a_foreign_origin() -> None:
    user = await database_sync_to_async(UserFactory)()
    cookie = await database_sync_to_async(_session_cookie)(user)
    communicator, connected, _ = await _connect([(b"origin", b"http://evil.example"), cookie])
    assert not connected


async def test_a_member_gets_the_text_encoded_at_publishing_and_only_their_teams_jobs_of_a_mixed_batch() -> None:
    team, other = await database_sync_to_async(TeamFactory)(), await database_sync_to_async(TeamFactory)()
    member = await database_sync_to_async(MembershipFactory)(team=team)
    member_ws, connected, _ = await _connect([ORIGIN, await database_sync_to_async(_session_cookie)(member.user)])
    assert connected
    ours = {"id": 1, "team": team.id, "state": "running", "event": "started", "message": "", "sim_time_s": 5.0}
    theirs = {**ours, "id": 2, "team": other.id}

    whole = fleet_event_message(live_event("jobs", jobs=[ours]))
    await get_channel_layer().group_send(team_group(team.id), whole)
    assert await member_ws.receive_from(timeout=5) == whole["text"]

    # Sent where the member's socket listens but naming another team's job too: filtered for it.
    await get_channel_layer().group_send(FLEET_GROUP, fleet_event_message(live_event("jobs", jobs=[ours, theirs])))
    assert await member_ws.receive_json_from(timeout=5) == {"v": EVENT_VERSION, "kind": "jobs", "jobs": [ours]}
    await get_channel_layer().group_send(FLEET_GROUP, fleet_event_message(live_event("jobs", jobs=[theirs])))
    assert await member_ws.receive_nothing(timeout=0.5)
    await member_ws.disconnect()
