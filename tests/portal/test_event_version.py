"""Every event the fleet websocket forwards carries the payloads' version, and the API schema
documents each kind of event with it."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.test import TestCase

from api.schema import WEBSOCKET, WEBSOCKET_EVENTS
from core.groups import ALL_JOBS_GROUP, FLEET_GROUP, team_group, user_group
from core.socket_events import EVENT_VERSION, fleet_event_message
from scheduling.cycle.failures import node_kill
from scheduling.live.feed import fleet_heartbeat_publish, incidents_publish
from scheduling.models import FleetClock, Node
from tenants.models import Membership
from tenants.services import notification_send
from tests.factories import MembershipFactory
from tests.scheduling.conftest import Fleet, build_fleet

pytestmark = pytest.mark.django_db


async def _drain(channel: str) -> list[dict[str, Any]]:
    """Every message waiting on the channel; stops at the first second with none."""
    layer = get_channel_layer()
    messages = []
    while True:
        try:
            messages.append(await asyncio.wait_for(layer.receive(channel), timeout=1.0))
        except TimeoutError:
            return messages


def _every_event_kind(fleet: Fleet) -> list[dict[str, Any]]:
    layer = get_channel_layer()
    lead = MembershipFactory(team=fleet.team, role=Membership.Role.LEAD).user
    channel = async_to_sync(layer.new_channel)()
    groups = [FLEET_GROUP, ALL_JOBS_GROUP, team_group(fleet.team.pk), user_group(lead.pk)]
    for group in groups:
        async_to_sync(layer.group_add)(group, channel)
    try:
        fleet.submit(gpus=8)
        fleet.submit(gpus=32)  # waits for the first: its reason is news to its team
        fleet.tick()  # the fleet's share, the job that started and the one that waits
        fleet_heartbeat_publish()
        incident = node_kill(node=Node.objects.order_by("pk").first(), sim_now_s=FleetClock.objects.get().sim_now_s)
        incidents_publish(incident_ids=[incident.pk])
        with TestCase.captureOnCommitCallbacks(execute=True):
            notification_send(user=lead, message="Your quota changed.", url="/teams/language-models/")
        return async_to_sync(_drain)(channel)
    finally:
        for group in groups:
            async_to_sync(layer.group_discard)(group, channel)


def test_every_kind_of_event_pushed_to_sockets_carries_the_payload_version() -> None:
    messages = _every_event_kind(build_fleet())

    kinds = {message["payload"]["kind"] for message in messages}
    documented = {schema["properties"]["kind"]["enum"][0] for schema in WEBSOCKET_EVENTS.values()}
    assert kinds == documented == {"heartbeat", "fleet", "jobs", "waits", "incident", "notice"}
    assert {message["type"] for message in messages} == {"fleet.event"}
    assert all(message["payload"]["v"] == EVENT_VERSION == 1 for message in messages)


def test_each_documented_event_requires_the_version_the_schema_announces() -> None:
    assert WEBSOCKET["version"] == EVENT_VERSION
    for schema in WEBSOCKET_EVENTS.values():
        assert "v" in schema["required"]
        assert schema["properties"]["v"]["enum"] == [EVENT_VERSION]


def test_a_payloads_own_fields_are_kept_beside_the_version() -> None:
    message = fleet_event_message({"kind": "heartbeat", "seq": 3})

    payload = {"v": EVENT_VERSION, "kind": "heartbeat", "seq": 3}
    assert message == {"type": "fleet.event", "payload": payload, "text": json.dumps(payload), "teams": []}


def test_a_message_names_the_teams_whose_jobs_it_carries_and_a_batch_without_jobs_names_none() -> None:
    jobs = [{"id": 1, "team": 7}, {"id": 2, "team": 3}, {"id": 3, "team": 7}]

    assert fleet_event_message({"kind": "jobs", "jobs": jobs})["teams"] == [3, 7]
    assert fleet_event_message({"kind": "waits", "jobs": []})["teams"] is None
    assert fleet_event_message({"kind": "incident", "id": 4})["teams"] == []
    assert fleet_event_message({"kind": "notice", "team": 5})["teams"] == [5]
