"""The live websocket accepts an API token as well as the session; revoking the token closes it at once."""

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from api.models import ApiToken
from api.services import api_token_create, api_token_revoke
from core.groups import ACCESS_CHANGED, FLEET_GROUP, team_group, user_group
from portal.asgi import application
from portal.consumers import CLOSE_SESSION_ENDED, CLOSE_UNAUTHENTICATED
from tests.factories import MembershipFactory

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("children_disconnected")]
ORIGIN = (b"origin", b"http://127.0.0.1")


async def _open(secret: str) -> tuple[bool, int | None, WebsocketCommunicator]:
    socket = WebsocketCommunicator(
        application, "/ws/fleet/", headers=[ORIGIN, (b"authorization", f"Bearer {secret}".encode())]
    )
    connected, code = await socket.connect(timeout=10)
    return connected, code, socket


async def test_a_script_opens_the_socket_with_a_token_and_gets_its_teams_events() -> None:
    membership = await database_sync_to_async(MembershipFactory)()
    secret = (await database_sync_to_async(api_token_create)(user=membership.user, name="feed")).secret

    connected, _, socket = await _open(secret)

    assert connected
    layer = get_channel_layer()
    await layer.group_send(FLEET_GROUP, {"type": "fleet.event", "payload": {"kind": "heartbeat", "seq": 1}})
    assert (await socket.receive_json_from(timeout=5))["kind"] == "heartbeat"
    job = {"id": 1, "team": membership.team_id, "state": "running", "event": "started", "message": "", "sim_time_s": 0}
    await layer.group_send(
        team_group(membership.team_id), {"type": "fleet.event", "payload": {"kind": "jobs", "jobs": [job]}}
    )
    assert (await socket.receive_json_from(timeout=5))["jobs"] == [job]
    await socket.disconnect()


async def test_a_wrong_token_is_closed_as_unauthenticated() -> None:
    connected, code, socket = await _open("fl_wrong")

    assert not connected
    assert code == CLOSE_UNAUTHENTICATED
    await socket.disconnect()


async def test_revoking_the_token_closes_its_open_socket_at_the_next_check() -> None:
    membership = await database_sync_to_async(MembershipFactory)()
    secret = (await database_sync_to_async(api_token_create)(user=membership.user, name="feed")).secret
    connected, _, socket = await _open(secret)
    assert connected
    key = await database_sync_to_async(lambda: ApiToken.objects.get().token_key)()

    await database_sync_to_async(api_token_revoke)(user=membership.user, token_key=key)
    await get_channel_layer().group_send(user_group(membership.user_id), {"type": ACCESS_CHANGED})

    assert (await socket.receive_output(timeout=5)) == {"type": "websocket.close", "code": CLOSE_SESSION_ENDED}
    await socket.disconnect()


def _revoke_through_the_tokens_page(user_id: int, token_key: str) -> int:
    client = Client()
    client.force_login(User.objects.get(pk=user_id))
    return client.post(reverse("api-token-revoke", args=[token_key])).status_code


async def test_revoking_the_token_on_the_tokens_page_closes_its_open_socket_at_once() -> None:
    membership = await database_sync_to_async(MembershipFactory)()
    new = await database_sync_to_async(api_token_create)(user=membership.user, name="feed")
    connected, _, socket = await _open(new.secret)
    assert connected

    status = await database_sync_to_async(_revoke_through_the_tokens_page)(membership.user_id, new.token.token_key)

    assert status == 302
    # No re-check is posted: the revocation itself closes the socket.
    assert (await socket.receive_output(timeout=5)) == {"type": "websocket.close", "code": CLOSE_SESSION_ENDED}
    await socket.disconnect()


async def test_revoking_one_token_leaves_the_sockets_of_the_users_other_tokens_open() -> None:
    membership = await database_sync_to_async(MembershipFactory)()
    revoked = await database_sync_to_async(api_token_create)(user=membership.user, name="old")
    kept = await database_sync_to_async(api_token_create)(user=membership.user, name="new")
    _, _, revoked_socket = await _open(revoked.secret)
    _, _, kept_socket = await _open(kept.secret)

    await database_sync_to_async(api_token_revoke)(user=membership.user, token_key=revoked.token.token_key)

    assert (await revoked_socket.receive_output(timeout=5))["type"] == "websocket.close"
    await get_channel_layer().group_send(FLEET_GROUP, {"type": "fleet.event", "payload": {"kind": "heartbeat"}})
    assert (await kept_socket.receive_json_from(timeout=5))["kind"] == "heartbeat"
    await revoked_socket.disconnect()
    await kept_socket.disconnect()
