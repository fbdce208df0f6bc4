"""Telling a user's open websockets that what they may read changed: after a membership change
(they re-check and leave the groups they may no longer read), when a session ends (the sockets
that session opened close) or an API token is revoked (the sockets it opened close); and
forwarding a user's new notices. `portal.socket_receivers` calls these when Django ends a session
and when tenants' services announce memberships and notices through `tenants.signals`. Also
the one shape of the events sockets forward to pages, ``fleet_event_message``, stamped with the
payloads' version and encoded once for every socket it reaches."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction
from redis.exceptions import RedisError

from core.groups import ACCESS_CHANGED, SESSION_ENDED, TOKEN_REVOKED, token_group, user_group

logger = logging.getLogger(__name__)

# The version of every event payload a socket forwards to its page (``"v"``), documented with the
# payloads in the API schema. Within a version fields are only added, which readers ignore; a
# field removed or changing meaning needs the next version.
EVENT_VERSION = 1


# Events that carry a batch of jobs, each naming its team: a socket forwards the jobs it may read.
BATCH_KINDS = frozenset({"jobs", "waits"})
FLEET_EVENT = "fleet.event"


def fleet_event_message(payload: dict[str, Any]) -> dict[str, Any]:
    """The channel-layer message that carries ``payload`` to the sockets of a group: the payload,
    its JSON text encoded here once for every socket in every process, and the teams it names,
    by which each socket decides whether its user may read it whole (``payload_teams``)."""
    stamped = {"v": EVENT_VERSION, **payload}
    return {"type": FLEET_EVENT, "payload": stamped, "text": json.dumps(stamped), "teams": payload_teams(stamped)}


def payload_teams(payload: dict[str, Any]) -> list[int] | None:
    """The teams whose jobs a payload tells of: a socket may forward it whole only if its user may
    read every one (an empty list: a fleet-wide event, for everyone). ``None`` for a batch
    without jobs, which no socket forwards."""
    if payload.get("kind") in BATCH_KINDS:
        jobs = payload.get("jobs") or []
        return sorted({int(job["team"]) for job in jobs}) if jobs else None
    team = payload.get("team")
    return [] if team is None else [int(team)]


def socket_access_changed_publish(*, user_ids: Iterable[int]) -> None:
    """Once the current transaction commits, each user's sockets re-check their access."""
    messages = [(user_group(user_id), {"type": ACCESS_CHANGED}) for user_id in sorted(set(user_ids))]
    transaction.on_commit(lambda: _group_send_all(messages))


def socket_session_ended_publish(*, user_id: int, session_key: str) -> None:
    """Once the current transaction commits, the sockets opened by this session close; the
    user's other sessions keep theirs."""
    message = {"type": SESSION_ENDED, "session_key": session_key}
    transaction.on_commit(lambda: _group_send_all([(user_group(user_id), message)]))


def socket_users_close_publish(*, user_ids: Iterable[int]) -> None:
    """Once the current transaction commits, every open socket of these users closes, whichever
    session or token opened it: a session end that names no session ends them all."""
    messages = [
        (user_group(user_id), {"type": SESSION_ENDED, "session_key": None}) for user_id in sorted(set(user_ids))
    ]
    transaction.on_commit(lambda: _group_send_all(messages))


def socket_tokens_revoked_publish(*, token_digests: Iterable[str]) -> None:
    """Once the current transaction commits, the sockets opened with these API tokens close: a
    revoked token stops streaming at once, not at the socket's next periodic re-check."""
    messages = [(token_group(digest), {"type": TOKEN_REVOKED}) for digest in sorted(set(token_digests))]
    transaction.on_commit(lambda: _group_send_all(messages))


def user_event_publish(*, user_id: int, payload: dict[str, Any]) -> None:
    """Once the current transaction commits, every open socket of the user forwards ``payload``
    to its page (a new notice and the unread count, say)."""
    user_events_publish(events=[(user_id, payload)])


def user_events_publish(*, events: Iterable[tuple[int, dict[str, Any]]]) -> None:
    """``user_event_publish`` for many users in one pass over the channel layer (at once when no
    transaction is open)."""
    messages = [(user_group(user_id), fleet_event_message(payload)) for user_id, payload in events]
    if not messages:
        return
    # Robust: a page missing a notice must never stop what else the commit triggers (its mail).
    transaction.on_commit(lambda: _group_send_all(messages), robust=True)


def _group_send_all(messages: list[tuple[str, dict[str, Any]]]) -> None:
    """Best effort: if Redis is down the write still stands, and each socket's periodic re-check
    (and the channel layer's group expiry) catches up."""
    layer = get_channel_layer()
    if layer is None or not messages:
        return

    async def send_all() -> None:
        for group, message in messages:
            await layer.group_send(group, message)

    try:
        async_to_sync(send_all)()
    except (RedisError, OSError):
        logger.warning("Could not tell open websockets about an access change", exc_info=True)
