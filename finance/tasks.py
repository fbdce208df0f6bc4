"""Celery tasks for finance: thin interfaces that call one service each (routed to the
``reports`` queue in settings)."""

from __future__ import annotations

import smtplib

from celery import shared_task

from finance import services


@shared_task
def budgets_check() -> int:
    return len(services.budgets_check())


@shared_task
def report_export_build(*, export_id: int) -> None:
    services.report_export_build(export_id=export_id)


@shared_task(autoretry_for=(OSError, smtplib.SMTPException), retry_backoff=True, max_retries=8)
def month_report_mail(*, close_id: int) -> int:
    return services.month_report_mail_send(close_id=close_id)
