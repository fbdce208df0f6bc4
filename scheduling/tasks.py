"""Celery tasks: thin interfaces that call one service each."""

from __future__ import annotations

from typing import Any

from celery import shared_task

from scheduling.services import fleet_heartbeat_publish


@shared_task(ignore_result=False)
def fleet_heartbeat() -> dict[str, Any]:
    return fleet_heartbeat_publish()
