"""An open fleet websocket follows its user's access after connect: a membership removed or
added, a session logged out or expired, a fleet admin demoted. Real Redis channel layer, full
ASGI stack."""

from __future__ import annotations

import asyncio
import copy
import time
from http.cookies import SimpleCookie
from typing import Any

import pytest
import redis.asyncio as redis
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.contrib.auth.models import Group, User
from django.contrib.sessions.models import Session
from django.test import Client

from core.groups import ACCESS_CHANGED, ALL_JOBS_GROUP, FLEET_GROUP, team_group, user_group
from portal.asgi import application
from portal.consumers import CLOSE_SESSION_ENDED
from tenants.models import Membership
from tenants.roles import FLEET_ADMIN
from tenants.services import membership_add, membership_remove
from tests.factories import MembershipFactory, TeamFactory, UserFactory

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("children_disconnected")]
ORIGIN = (b"origin", b"http://127.0.0.1")


def _logged_in(user: User) -> tuple[Client, tuple[bytes, bytes]]:
    """A browser session for ``user``: its test client and its session cookie header."""
    client = Client()
    client.force_login(user)
    cookie = SimpleCookie()
    cookie[settings.SESSION_COOKIE_NAME] = client.cookies[settings.SESSION_COOKIE_NAME].value
    return client, (b"cookie", cookie.output(header="", sep="; ").strip().encode())


async def _open(cookie: tuple[bytes, bytes]) -> WebsocketCommunicator:
    socket = WebsocketCommunicator(application, "/ws/fleet/", headers=[ORIGIN, cookie])
    connected, _ = await socket.connect(timeout=10)
    assert connected
    return socket


async def _send(group: str, payload: dict[str, Any]) -> None:
    await get_channel_layer().group_send(group, {"type": "fleet.event", "payload": payload})


async def _group_size(group: str) -> int:
    client = redis.Redis.from_url(settings.REDIS_URL)
    try:
        return int(await client.zcard(f"{settings.CHANNEL_LAYERS['default']['CONFIG']['prefix']}:group:{group}"))
    finally:
        await client.aclose()


async def _eventually_empty(group: str, timeout_s: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if await _group_size(group) == 0:
            return True
        await asyncio.sleep(0.05)
    return False


async def _closed_with(socket: WebsocketCommunicator) -> int:
    output = await socket.receive_output(timeout=5)
    assert output["type"] == "websocket.close"
    return int(output["code"])


@pytest.fixture
def clean_team_groups() -> None:
    """Team ids start again with each test database: drop an earlier run's group members."""

    async def clean() -> None:
        client = redis.Redis.from_url(settings.REDIS_URL)
        prefix = settings.CHANNEL_LAYERS["default"]["CONFIG"]["prefix"]
        keys = [key async for key in client.scan_iter(f"{prefix}:group:team.*")]
        if keys:
            await client.delete(*keys)
        await client.aclose()

    asyncio.run(clean())


@pytest.mark.usefixtures("clean_team_groups")
async def test_a_member_taken_out_of_a_team_stops_receiving_its_job_events_at_once() -> None:
    membership = await database_sync_to_async(MembershipFactory)()
    _, cookie = await database_sync_to_async(_logged_in)(membership.user)
    socket = await _open(cookie)

    await database_sync_to_async(membership_remove)(actor=None, membership_id=membership.pk)
    await _send(team_group(membership.team_id), {"kind": "job", "team": membership.team_id, "id": 1})
    await _send(FLEET_GROUP, {"kind": "heartbeat", "seq": 1})

    assert await socket.receive_json_from(timeout=5) == {"kind": "heartbeat", "seq": 1}
    assert await socket.receive_nothing(timeout=0.3)
    assert await _eventually_empty(team_group(membership.team_id))
    await socket.disconnect(timeout=10)


@pytest.mark.usefixtures("clean_team_groups")
async def test_a_user_added_to_a_team_starts_receiving_its_job_events_on_an_open_socket() -> None:
    user = await database_sync_to_async(UserFactory)()
    team = await database_sync_to_async(TeamFactory)()
    _, cookie = await database_sync_to_async(_logged_in)(user)
    socket = await _open(cookie)

    await database_sync_to_async(membership_add)(actor=None, team=team, user=user)
    # The change reaches the socket before the next event does: both travel in order.
    await _send(FLEET_GROUP, {"kind": "heartbeat", "seq": 1})
    assert await socket.receive_json_from(timeout=5) == {"kind": "heartbeat", "seq": 1}
    await _send(team_group(team.pk), {"kind": "job", "team": team.pk, "id": 7})

    assert await socket.receive_json_from(timeout=5) == {"kind": "job", "team": team.pk, "id": 7}
    await socket.disconnect(timeout=10)


async def test_logging_out_closes_the_sockets_of_that_session_and_no_other() -> None:
    user = await database_sync_to_async(UserFactory)()
    laptop, laptop_cookie = await database_sync_to_async(_logged_in)(user)
    _, phone_cookie = await database_sync_to_async(_logged_in)(user)
    laptop_socket = await _open(laptop_cookie)
    phone_socket = await _open(phone_cookie)

    response = await database_sync_to_async(laptop.post)("/logout/")
    assert response.status_code == 302

    assert await _closed_with(laptop_socket) == CLOSE_SESSION_ENDED
    await _send(FLEET_GROUP, {"kind": "heartbeat", "seq": 2})
    assert await phone_socket.receive_json_from(timeout=5) == {"kind": "heartbeat", "seq": 2}
    await laptop_socket.disconnect(timeout=10)
    await phone_socket.disconnect(timeout=10)


@pytest.mark.usefixtures("clean_team_groups")
async def test_a_socket_whose_session_was_deleted_closes_at_its_next_check_and_leaves_its_groups() -> None:
    membership = await database_sync_to_async(MembershipFactory)()
    _, cookie = await database_sync_to_async(_logged_in)(membership.user)
    socket = await _open(cookie)

    await database_sync_to_async(lambda: Session.objects.all().delete())()
    await get_channel_layer().group_send(user_group(membership.user_id), {"type": ACCESS_CHANGED})

    assert await _closed_with(socket) == CLOSE_SESSION_ENDED
    assert await _eventually_empty(team_group(membership.team_id))
    await socket.disconnect(timeout=10)


async def test_a_demoted_fleet_admin_stops_receiving_other_teams_jobs_at_the_next_check() -> None:
    admin = await database_sync_to_async(UserFactory)()
    admins = (await database_sync_to_async(Group.objects.get_or_create)(name=FLEET_ADMIN))[0]
    await database_sync_to_async(admin.groups.add)(admins)
    _, cookie = await database_sync_to_async(_logged_in)(admin)
    socket = await _open(cookie)
    job = {"id": 1, "team": 999, "state": "running"}
    await _send(ALL_JOBS_GROUP, {"kind": "jobs", "jobs": [job]})
    assert await socket.receive_json_from(timeout=5) == {"kind": "jobs", "jobs": [job]}

    await database_sync_to_async(admin.groups.remove)(admins)
    await get_channel_layer().group_send(user_group(admin.pk), {"type": ACCESS_CHANGED})
    await _send(ALL_JOBS_GROUP, {"kind": "jobs", "jobs": [job]})
    await _send(FLEET_GROUP, {"kind": "heartbeat", "seq": 3})

    assert await socket.receive_json_from(timeout=5) == {"kind": "heartbeat", "seq": 3}
    assert await socket.receive_nothing(timeout=0.3)
    await socket.disconnect(timeout=10)


async def test_a_batch_of_job_changes_reaches_each_socket_with_only_the_jobs_of_teams_it_may_read() -> None:
    membership = await database_sync_to_async(MembershipFactory)()
    _, cookie = await database_sync_to_async(_logged_in)(membership.user)
    socket = await _open(cookie)
    own = {"id": 1, "team": membership.team_id, "state": "running"}
    foreign = {"id": 2, "team": membership.team_id + 1000, "state": "running"}

    await _send(FLEET_GROUP, {"kind": "jobs", "jobs": [own, foreign]})
    await _send(FLEET_GROUP, {"kind": "jobs", "jobs": [foreign]})
    await _send(FLEET_GROUP, {"kind": "job", "team": foreign["team"], "id": 2})

    assert await socket.receive_json_from(timeout=5) == {"kind": "jobs", "jobs": [own]}
    assert await socket.receive_nothing(timeout=0.5)
    await socket.disconnect(timeout=10)


@pytest.mark.usefixtures("clean_team_groups")
async def test_without_any_notice_a_socket_drops_a_lost_membership_and_keeps_its_other_groups_past_their_expiry(
    settings: Any,
) -> None:
    layers = copy.deepcopy(settings.CHANNEL_LAYERS)
    layers["default"]["CONFIG"]["group_expiry"] = 6  # so sockets re-check every 1.2 to 1.5 s
    settings.CHANNEL_LAYERS = layers
    membership = await database_sync_to_async(MembershipFactory)()
    _, cookie = await database_sync_to_async(_logged_in)(membership.user)
    socket = await _open(cookie)
    opened = time.monotonic()

    # Deleted behind the services' back (as a cascade would): nobody tells the socket.
    await database_sync_to_async(lambda: Membership.objects.filter(pk=membership.pk).delete())()

    # Left well before the group itself would expire.
    assert await _eventually_empty(team_group(membership.team_id), timeout_s=4)
    await _send(team_group(membership.team_id), {"kind": "job", "team": membership.team_id, "id": 1})
    assert await socket.receive_nothing(timeout=0.3)
    # Past the group expiry the socket is still in the fleet group: it renewed its membership.
    await asyncio.sleep(max(0.0, opened + 7 - time.monotonic()))
    await _send(FLEET_GROUP, {"kind": "heartbeat", "seq": 4})
    assert await socket.receive_json_from(timeout=5) == {"kind": "heartbeat", "seq": 4}
    await socket.disconnect(timeout=10)
