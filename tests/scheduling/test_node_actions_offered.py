"""The fleet map's node dialog offers only the actions that apply to the node's state: no
"Uncordon" for a node that is up, no "Cordon" for one already cordoned or down."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from django.test import Client

from scheduling.models import Node
from scheduling.services.nodes import NODE_ACTIONS, NODE_ACTIONS_BY_STATE, node_action_states
from tenants.roles import FLEET_ADMIN
from tests.factories import UserFactory
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
