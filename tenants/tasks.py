"""Celery tasks for tenants: thin interfaces that call one service each."""

from __future__ import annotations

import smtplib

from celery import shared_task

from tenants.services.notifications import notification_email_send


@shared_task(
    autoretry_for=(OSError, smtplib.SMTPException),
    retry_backoff=True,
    retry_backoff_max=600,
    max_retries=8,
)
def notification_email(*, to: list[str], subject: str, message: str) -> None:
    notification_email_send(to=to, subject=subject, message=message)
