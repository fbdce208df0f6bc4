from __future__ import annotations

from functools import partial

from django.contrib.auth.models import User
from django.core.mail import send_mail
from django.db import transaction

from portal.socket_events import user_event_publish
from tenants.models import Notification


def notification_send(*, user: User, message: str, url: str = "") -> Notification:
    """A notice for the user; once it commits, their open pages show it and the unread count."""
    notice = Notification.objects.create(user=user, message=message[:300], url=url)
    unread = Notification.objects.filter(user_id=user.pk, read=False).count()
    user_event_publish(
        user_id=user.pk, payload={"kind": "notice", "message": notice.message, "url": url, "unread": unread}
    )
    return notice


def notification_mark_read(*, user: User, notification_id: int | None = None) -> int:
    """Mark one of the user's notices read, or all of them; returns how many changed."""
    notices = Notification.objects.filter(user_id=user.pk, read=False)
    if notification_id is not None:
        notices = notices.filter(pk=notification_id)
    return notices.update(read=True)


def notification_email_queue(*, to: str, subject: str, message: str) -> None:
    """Mail a notice from a Celery worker once the current transaction commits.

    The web request neither waits for the mail server nor fails with it, and a change that is
    rolled back mails nothing. Robust: a broker outage is logged and the change still stands.
    """
    from tenants.tasks import notification_email  # the task calls back into this module

    transaction.on_commit(partial(notification_email.delay, to=[to], subject=subject, message=message), robust=True)


def notification_email_send(*, to: list[str], subject: str, message: str) -> None:
    """Send one notice by email now: the worker's half of ``notification_email_queue``."""
    send_mail(subject=subject, message=message, from_email=None, recipient_list=to, fail_silently=False)
