"""A single sign-on that takes access away closes every open socket of the user at once (their
sessions' and their API tokens'), over the real Redis channel layer; one that only grants access
closes none, and nobody else's socket is touched."""

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User

from api.services import api_token_create
from portal.asgi import application
from portal.consumers import CLOSE_SESSION_ENDED
from tenants.group_map import group_map_parse
from tenants.services.sso import SsoClaims, sso_login
from tests.factories import MembershipFactory, TeamFactory
from tests.portal.test_consumers import ORIGIN, _session_cookie

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("children_disconnected")]
GROUP_MAP = group_map_parse("ml-admins=role:admin,vision-team=team:vision:lead")


def _sign_in(groups: list[str]) -> User:
    claims = SsoClaims(
        issuer="https://idp.example.org", subject="s-alice", username="alice", email="", groups=frozenset(groups)
    )
    return sso_login(claims=claims, group_map=GROUP_MAP)


async def _open(headers: list[tuple[bytes, bytes]]) -> WebsocketCommunicator:
    socket = WebsocketCommunicator(application, "/ws/fleet/", headers=[ORIGIN, *headers])
    connected, _ = await socket.connect(timeout=10)
    assert connected
    return socket


async def _sockets_of(user: User) -> list[WebsocketCommunicator]:
    """Two browser sessions and a script's API token."""
    secret = (await database_sync_to_async(api_token_create)(user=user, name="feed")).secret
    return [
        await _open([await database_sync_to_async(_session_cookie)(user)]),
        await _open([await database_sync_to_async(_session_cookie)(user)]),
        await _open([(b"authorization", f"Bearer {secret}".encode())]),
    ]


async def test_a_removed_group_closes_every_socket_of_the_user_and_no_one_elses() -> None:
    team = await database_sync_to_async(TeamFactory)(slug="vision")
    alice = await database_sync_to_async(_sign_in)(["vision-team", "ml-admins"])
    bob = (await database_sync_to_async(MembershipFactory)(team=team)).user
    sockets = await _sockets_of(alice)
    bystander = await _open([await database_sync_to_async(_session_cookie)(bob)])

    await database_sync_to_async(_sign_in)(["ml-admins"])

    for socket in sockets:
        assert await socket.receive_output(timeout=5) == {"type": "websocket.close", "code": CLOSE_SESSION_ENDED}
    assert await bystander.receive_nothing(timeout=0.5)
    await bystander.disconnect()


async def test_a_login_that_only_grants_closes_nothing() -> None:
    await database_sync_to_async(TeamFactory)(slug="vision")
    alice = await database_sync_to_async(_sign_in)([])
    sockets = await _sockets_of(alice)

    await database_sync_to_async(_sign_in)(["vision-team", "ml-admins"])

    for socket in sockets:
        assert await socket.receive_nothing(timeout=0.5)
        await socket.disconnect()
