"""Plumbing from what happens elsewhere to the users' open websockets: Django ending a session,
and tenants' services announcing a new notice or changed memberships through `tenants.signals`
(tenants imports nothing of the web layer). The messages themselves are `core.socket_events`'."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.contrib.auth.signals import user_logged_out
from django.dispatch import receiver
from django.http import HttpRequest

from core.live_events import live_event
from core.socket_events import (
    socket_access_changed_publish,
    socket_session_ended_publish,
    socket_users_close_publish,
    user_event_publish,
)
from tenants.signals import access_revoked, memberships_changed, notice_created


@receiver(user_logged_out, dispatch_uid="portal.socket_receivers.sockets_close_on_logout")
def sockets_close_on_logout(sender: type, request: HttpRequest | None, user: Any, **kwargs: Any) -> None:
    """Plumbing from Django's logout to the sockets of the session being ended."""
    session_key = request.session.session_key if request is not None else None
    if user is not None and user.is_authenticated and session_key:
        socket_session_ended_publish(user_id=user.pk, session_key=session_key)


@receiver(notice_created)
def notice_publish(sender: type, *, user_id: int, message: str, url: str, unread: int, **kwargs: Any) -> None:
    """A new notice reaches the user's open pages with their unread count (`tenants.signals`)."""
    user_event_publish(user_id=user_id, payload=live_event("notice", message=message, url=url, unread=unread))


@receiver(memberships_changed)
def memberships_publish(sender: type, *, user_ids: Iterable[int], **kwargs: Any) -> None:
    """Users whose memberships changed have their sockets re-check their access (`tenants.signals`)."""
    socket_access_changed_publish(user_ids=user_ids)


@receiver(access_revoked)
def access_revoked_publish(sender: type, *, user_ids: Iterable[int], **kwargs: Any) -> None:
    """Users who lost a membership or a role have every open socket closed (`tenants.signals`)."""
    socket_users_close_publish(user_ids=user_ids)
