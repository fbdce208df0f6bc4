"""The heartbeat task runs in a real Celery worker process over real Redis and reaches the
Channels layer."""

from __future__ import annotations

import asyncio
import subprocess
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from core.groups import FLEET_GROUP
from scheduling.tasks import fleet_heartbeat
from tests.factories import NodeFactory

pytestmark = pytest.mark.django_db(transaction=True)


async def _receive(channel: str, timeout_s: float) -> dict[str, Any]:
    layer = get_channel_layer()
    return await asyncio.wait_for(layer.receive(channel), timeout_s)


def test_a_real_worker_runs_the_heartbeat_task_against_the_test_database(
    celery_worker_process: subprocess.Popen[bytes],
) -> None:
    NodeFactory.create_batch(3)

    payload = fleet_heartbeat.delay().get(timeout=30)

    assert payload["kind"] == "heartbeat"
    assert payload["nodes"] == 3
    assert payload["gpus"] == 24


def test_the_heartbeat_from_the_worker_reaches_the_fleet_group(
    celery_worker_process: subprocess.Popen[bytes],
) -> None:
    NodeFactory.create_batch(2)
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(FLEET_GROUP, channel)

    sent = fleet_heartbeat.delay().get(timeout=30)
    message = async_to_sync(_receive)(channel, 10)

    assert message["type"] == "fleet.event"
    assert message["payload"]["seq"] == sent["seq"]
    assert message["payload"]["gpus"] == 16
    async_to_sync(layer.group_discard)(FLEET_GROUP, channel)
