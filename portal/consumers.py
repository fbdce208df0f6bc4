"""Websocket consumers: forward fleet-wide and per-team events to logged-in users."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import random
from collections.abc import Awaitable, Callable
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings
from django.db import DatabaseError
from redis.exceptions import RedisError

from api.socket_auth import socket_user_for_token
from core.groups import ACCESS_CHANGED, SESSION_ENDED, TOKEN_REVOKED, token_group
from core.socket_events import FLEET_EVENT
from portal.socket_access import (
    SocketAccess,
    socket_access_for,
    socket_access_for_session,
    socket_access_for_token,
    socket_text_for,
)
from scheduling.live.feed import fleet_heartbeat_message

logger = logging.getLogger(__name__)

# Close codes (4000-4999 are free for applications).
CLOSE_UNAUTHENTICATED = 4401
CLOSE_SESSION_ENDED = 4403
CLOSE_TRY_AGAIN = 1013

# A group operation that fails (Redis restarting, say) is retried this many times, backing off.
LAYER_ATTEMPTS = 4
LAYER_BACKOFF_S = 0.2
# Group membership expires after the channel layer's group_expiry unless renewed: each socket
# re-checks its access and renews its groups a few times per expiry period, so a socket that
# vanished without leaving its groups is dropped from them within one period.
RECHECKS_PER_GROUP_EXPIRY = 4
DEFAULT_GROUP_EXPIRY_S = 86400
# Events a socket keeps queued when its page reads slower than they come: the oldest go first.
OUTBOX_EVENTS = 100
# Messages that may change what a socket forwards: events behind them wait until they are handled.
HELD_BEHIND = frozenset({ACCESS_CHANGED, SESSION_ENDED, TOKEN_REVOKED})


class FleetConsumer(AsyncJsonWebsocketConsumer):
    """Joins the fleet group, the user's own group and the job groups the user may read (their
    teams', or every team's for fleet admins), then forwards events. Re-checks what the user may
    read when told that it changed and every few minutes, and closes when the session ends."""

    access: SocketAccess | None = None
    session_key: str | None = None
    token_digest: str | None = None  # opened with an API token rather than a session
    groups_joined: set[str]
    recheck_timer: asyncio.Task[None] | None = None
    # Events taken from the channel layer's reader, to write in order (`_take`), and the task
    # writing them; messages of other types on their way through the consumer's own receive,
    # which the events behind them wait for.
    outbox: collections.deque[dict[str, Any]]
    writer: asyncio.Task[None] | None = None
    held: int = 0
    accepted: bool = False

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            # Scripts authenticate with "Authorization: Bearer <API token>" instead of a session.
            found = await database_sync_to_async(socket_user_for_token)(headers=self.scope.get("headers", []))
            if found is None:
                await self.close(code=CLOSE_UNAUTHENTICATED)
                return
            user, self.token_digest = found
        # The session the socket was opened with: re-checks ask whether it still logs the user in.
        self.session_key = getattr(self.scope.get("session"), "session_key", None)
        self.groups_joined = set()
        self.outbox = collections.deque(maxlen=OUTBOX_EVENTS)
        sink_add = getattr(self.channel_layer, "sink_add", None)
        if sink_add is not None:
            sink_add(self.channel_name, self._take)
            if settings.FLEET_SOCKET_HEARTBEAT_S > 0:
                # The process's own heartbeat reaches every socket it serves (no group message).
                self.channel_layer.beat_set(fleet_heartbeat_message, settings.FLEET_SOCKET_HEARTBEAT_S)
        self.access = await database_sync_to_async(socket_access_for)(user=user)
        if not await self._join(self._groups(self.access)):
            await self._end(CLOSE_TRY_AGAIN)
            return
        await self.accept()
        self.accepted = True
        self._write_soon()
        self.recheck_timer = asyncio.create_task(self._recheck_periodically())

    async def disconnect(self, code: int) -> None:
        await self._leave_all()

    async def dispatch(self, message: dict[str, Any]) -> None:
        """Channels closes the thread's stale database connections before every handler, a hop
        to a worker thread and back; forwarding an event reads no database, so a heartbeat to
        thousands of sockets costs no hop per socket. The other handlers read it through
        ``database_sync_to_async``, which closes stale connections itself. A message the
        layer's reader held events behind (`_take`) lets them go once handled."""
        if message.get("type") == FLEET_EVENT:
            await self.fleet_event(message)
            return
        try:
            await super().dispatch(message)
        finally:
            if message.get("type") in HELD_BEHIND:
                self.held = max(0, self.held - 1)
                self._write_soon()

    def _take(self, message: dict[str, Any]) -> bool:
        """The channel layer's reader hands this socket its messages (`FleetChannelLayer.sink_add`):
        events are queued and written by one task (no task switch per event through the
        consumer's receive); anything else goes through the consumer's own receive, and the events
        behind it wait until it is handled, so that they are filtered by the access it leaves."""
        if message.get("type") != FLEET_EVENT:
            if message.get("type") in HELD_BEHIND:
                self.held += 1
            return False
        self.outbox.append(message)
        self._write_soon()
        return True

    def _write_soon(self) -> None:
        if self.writer is None and self.outbox and not self.held and self.accepted and self.access is not None:
            self.writer = asyncio.get_running_loop().create_task(self._write())

    async def _write(self) -> None:
        """Forward the queued events in order while none is held back; a socket already gone
        ends it (its consumer is told by the server and leaves its groups)."""
        try:
            while self.outbox and not self.held and self.access is not None:
                text = socket_text_for(access=self.access, event=self.outbox.popleft())
                if text is not None:
                    await self.send(text_data=text)
        except Exception:  # noqa: BLE001 - the socket closed under the write; its disconnect cleans up
            logger.debug("A socket closed while events were written to it", exc_info=True)
            self.outbox.clear()
        finally:
            self.writer = None

    async def fleet_event(self, event: dict[str, Any]) -> None:
        """Forward the event's text, encoded once at publishing, or the part of it the user may read."""
        if self.access is None:
            return
        text = socket_text_for(access=self.access, event=event)
        if text is not None:
            await self.send(text_data=text)

    async def access_changed(self, event: dict[str, Any]) -> None:
        """Re-read what the user may see; leave the groups they may no longer read."""
        if self.access is None:
            return
        try:
            if self.token_digest is not None:
                access = await database_sync_to_async(socket_access_for_token)(
                    token_digest=self.token_digest, user_id=self.access.user_id
                )
            else:
                access = await database_sync_to_async(socket_access_for_session)(
                    session_key=self.session_key, user_id=self.access.user_id
                )
        except DatabaseError:
            # Unable to tell what the user may read now: close cleanly, the page reconnects.
            logger.warning("Could not re-check a socket's access", exc_info=True)
            await self._end(CLOSE_TRY_AGAIN)
            return
        if access is None:
            await self._end(CLOSE_SESSION_ENDED)
            return
        leaving = self.groups_joined - self._groups(access)
        self.access = access
        for group in leaving:
            self.groups_joined.discard(group)
            await _layer_call(self.channel_layer.group_discard, group, self.channel_name)
        # Joining again also renews membership of the groups the socket stays in.
        await self._join(self._groups(access))

    async def session_ended(self, event: dict[str, Any]) -> None:
        if self.access is not None and event.get("session_key") in (None, self.session_key):
            await self._end(CLOSE_SESSION_ENDED)

    async def token_revoked(self, event: dict[str, Any]) -> None:
        """The API token this socket was opened with was revoked (only such sockets join its group)."""
        if self.access is not None:
            await self._end(CLOSE_SESSION_ENDED)

    def _groups(self, access: SocketAccess) -> frozenset[str]:
        """The groups the socket belongs to: its user's, and its token's when a token opened it."""
        if self.token_digest is None:
            return access.groups
        return access.groups | {token_group(self.token_digest)}

    async def _join(self, groups: frozenset[str]) -> bool:
        joined = True
        for group in sorted(groups):
            # Recorded before the call: a socket torn down mid-call still leaves the group.
            self.groups_joined.add(group)
            joined = await _layer_call(self.channel_layer.group_add, group, self.channel_name) and joined
        return joined

    async def _leave_all(self) -> None:
        self.access = None
        sink_discard = getattr(self.channel_layer, "sink_discard", None)
        if sink_discard is not None:
            sink_discard(self.channel_name)
        if getattr(self, "outbox", None) is not None:
            self.outbox.clear()
        if self.writer is not None and self.writer is not asyncio.current_task():
            self.writer.cancel()
        self.writer = None
        if self.recheck_timer is not None and self.recheck_timer is not asyncio.current_task():
            self.recheck_timer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.recheck_timer
        self.recheck_timer = None
        groups: set[str] = getattr(self, "groups_joined", set())
        self.groups_joined = set()
        for group in groups:
            await _layer_call(self.channel_layer.group_discard, group, self.channel_name)

    async def _end(self, code: int) -> None:
        await self._leave_all()
        await self.close(code=code)

    async def _recheck_periodically(self) -> None:
        """Post an access check to this socket's own channel every so often, so that it runs
        in turn with the events the socket handles rather than beside them."""
        group_expiry_s = getattr(self.channel_layer, "group_expiry", DEFAULT_GROUP_EXPIRY_S)
        while True:
            await asyncio.sleep(group_expiry_s / RECHECKS_PER_GROUP_EXPIRY * random.uniform(0.8, 1.0))
            await _layer_call(self.channel_layer.send, self.channel_name, {"type": ACCESS_CHANGED})


async def _layer_call(call: Callable[[str, Any], Awaitable[None]], name: str, argument: Any) -> bool:
    """One channel-layer operation, retried with backoff while Redis is unreachable. Logs and
    gives up in the end: group expiry removes a member that could not be removed now."""
    for attempt in range(LAYER_ATTEMPTS):
        try:
            await call(name, argument)
            return True
        except (RedisError, OSError):
            if attempt == LAYER_ATTEMPTS - 1:
                logger.warning("Channel layer %s on %s failed", getattr(call, "__name__", call), name, exc_info=True)
                return False
            await asyncio.sleep(LAYER_BACKOFF_S * 2**attempt)
    return False
