from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser

from tenants.models import Notification


def notification_send(*, user: AbstractBaseUser, message: str, url: str = "") -> Notification:
    return Notification.objects.create(user=user, message=message[:300], url=url)


def notification_mark_read(*, user: AbstractBaseUser, notification_id: int | None = None) -> int:
    """Mark one of the user's notices read, or all of them; returns how many changed."""
    notices = Notification.objects.filter(user_id=user.pk, read=False)
    if notification_id is not None:
        notices = notices.filter(pk=notification_id)
    return notices.update(read=True)
