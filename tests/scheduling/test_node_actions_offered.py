"""The fleet map's node dialog offers only the actions that apply to the node's state: no
"Uncordon" for a node that is up, no "Cordon" for one already cordoned or down."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from django.test import Client

from scheduling.models import Job, Node
from scheduling.services.nodes import NODE_ACTIONS, NODE_ACTIONS_BY_STATE, node_action_states
from tenants.models import AuditEvent
from tenants.roles import FLEET_ADMIN
from tests.factories import MembershipFactory, UserFactory
from tests.scheduling.conftest import Fleet


@pytest.mark.parametrize(
    ("state", "offered"),
    [
        (Node.State.UP, {"cordon", "drain"}),
        (Node.State.CORDONED, {"uncordon", "drain"}),
        (Node.State.DOWN, {"uncordon"}),
    ],
)
def test_each_node_state_is_offered_only_the_actions_that_apply_to_it(state: str, offered: set[str]) -> None:
    assert set(NODE_ACTIONS_BY_STATE[state]) == offered
    assert {action for action, states in node_action_states() if state in states} == offered


def test_every_state_a_node_can_be_in_has_its_actions() -> None:
    assert set(NODE_ACTIONS_BY_STATE) == set(Node.State.values)
    assert [action for action, _ in node_action_states()] == list(NODE_ACTIONS)


def test_the_node_dialog_says_which_states_each_action_applies_to(fleet: Fleet) -> None:
    admin = UserFactory()
    admin.groups.add(Group.objects.get_or_create(name=FLEET_ADMIN)[0])
    client = Client()
    client.force_login(admin)

    page = client.get("/fleet/").content.decode()

    assert 'value="cordon" data-states="up"' in page
    assert 'value="uncordon" data-states="cordoned down"' in page
    assert 'value="drain" data-states="up cordoned"' in page


def _admin_client() -> Client:
    admin = UserFactory()
    admin.groups.add(Group.objects.get_or_create(name=FLEET_ADMIN)[0])
    client = Client()
    client.force_login(admin)
    return client


def test_a_drain_asks_first_naming_the_jobs_it_would_evict_and_does_nothing_yet(fleet: Fleet) -> None:
    job = fleet.submit(gpus=8, name="on-the-node")
    fleet.tick()
    node = Node.objects.get(allocations__job=job)

    answer = _admin_client().post("/fleet/node-action/", {"node": node.pk, "action": "drain"})

    page = answer.content.decode()
    assert answer.status_code == 200 and f"Drain node {node.name}?" in page
    assert f'<a href="/jobs/{job.pk}/">#{job.pk} on-the-node</a> · Language Models · 8 GPUs on this node' in page
    assert f'name="evicts" value="{job.pk}"' in page and "Drain and evict 1 job" in page
    assert Node.objects.get(pk=node.pk).state == Node.State.UP
    assert not AuditEvent.objects.exists()


def test_a_drain_confirmed_for_other_jobs_than_run_now_is_refused_and_asks_again(fleet: Fleet) -> None:
    job = fleet.submit(gpus=8, name="on-the-node")
    fleet.tick()
    node = Node.objects.get(allocations__job=job)

    answer = _admin_client().post("/fleet/node-action/", {"node": node.pk, "action": "drain", "evicts": ""})

    assert answer.status_code == 409
    assert "changed since you confirmed: nothing was done" in answer.content.decode()
    assert f"#{job.pk} on-the-node" in answer.content.decode()
    assert Node.objects.get(pk=node.pk).state == Node.State.UP
    assert Job.objects.get(pk=job.pk).grace_until_s is None


def test_a_confirmed_drain_cordons_and_evicts_the_jobs_it_named(fleet: Fleet) -> None:
    job = fleet.submit(gpus=8, name="on-the-node")
    fleet.tick()
    node = Node.objects.get(allocations__job=job)

    answer = _admin_client().post("/fleet/node-action/", {"node": node.pk, "action": "drain", "evicts": str(job.pk)})

    assert answer.status_code == 302
    assert Node.objects.get(pk=node.pk).state == Node.State.CORDONED
    assert Job.objects.get(pk=job.pk).grace_until_s is not None
    assert AuditEvent.objects.filter(kind=AuditEvent.Kind.NODE_DRAINED).exists()


def test_the_fleet_map_gives_what_a_drain_evicts_to_admins_only(fleet: Fleet) -> None:
    job = fleet.submit(gpus=8, name="on-the-node")
    fleet.tick()
    member = Client()
    member.force_login(MembershipFactory(team=fleet.team).user)

    assert f'"id": {job.pk}, "name": "on-the-node"' in _admin_client().get("/fleet/").content.decode()
    assert 'id="node-evictions"' not in member.get("/fleet/").content.decode()
