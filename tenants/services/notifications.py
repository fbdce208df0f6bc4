from __future__ import annotations

from collections.abc import Mapping

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.core.mail import send_mail

from core.tasks import enqueue_on_commit
from tenants.models import NoticeKind, Notification, NotificationPreference
from tenants.selectors import NOTICE_DEFAULTS, NoticeChannels, notification_preferences_for_user
from tenants.signals import notice_created


def notification_send(*, user: User, message: str, url: str = "", kind: str = "") -> Notification:
    """A notice for the user; once it commits, their open pages show it and the unread count.
    Sends whatever the user's preferences say: callers with a kind go through ``notice_deliver``."""
    notice = Notification.objects.create(user=user, kind=kind, message=message[:300], url=url)
    unread = Notification.objects.filter(user_id=user.pk, read=False).count()
    notice_created.send(sender=Notification, user_id=user.pk, message=notice.message, url=url, unread=unread)
    return notice


def notice_deliver(*, user: User, kind: NoticeKind, message: str, subject: str, url: str = "") -> Notification | None:
    """Tell the user of one event as they chose for its kind: a notice in the app, a mail sent by
    a worker after commit (when they have an address), both or neither. Returns the notice, if any."""
    wanted = notification_preferences_for_user(user=user)[kind]
    notice = notification_send(user=user, message=message, url=url, kind=kind) if wanted.in_app else None
    if wanted.email and user.email:
        notification_email_queue(to=user.email, subject=subject, message=message)
    return notice


def notification_preferences_save(*, user: User, choices: Mapping[str, NoticeChannels]) -> None:
    """Store the user's channels for each kind given (kinds left out keep what they had)."""
    unknown = sorted(set(choices) - set(NOTICE_DEFAULTS))
    if unknown:
        raise ValidationError(f"Unknown kind of notice: {', '.join(unknown)}.")
    NotificationPreference.objects.bulk_create(
        [
            NotificationPreference(user=user, kind=kind, in_app=channels.in_app, email=channels.email)
            for kind, channels in sorted(choices.items())
        ],
        update_conflicts=True,
        unique_fields=["user", "kind"],
        update_fields=["in_app", "email"],
    )


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
    enqueue_on_commit("tenants.tasks.notification_email", to=[to], subject=subject, message=message)


def notification_email_send(*, to: list[str], subject: str, message: str) -> None:
    """Send one notice by email now: the worker's half of ``notification_email_queue``."""
    send_mail(subject=subject, message=message, from_email=None, recipient_list=to, fail_silently=False)
