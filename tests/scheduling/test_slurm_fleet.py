"""The node table follows Slurm's node list (``scheduling.backends.slurm.nodes_sync``): nodes
that join appear, nodes that leave disappear (or go down while a job still holds them), and a node
Slurm reports down or not responding is dead, with an incident."""

from __future__ import annotations

import pytest

from scheduling.backends.slurm import nodes_sync, progress_slow_nodes
from scheduling.backends.slurm_api import SlurmNode
from scheduling.models import Incident, Node

pytestmark = pytest.mark.django_db

TOPOLOGY = {"node01": ("rack1", "spine"), "node02": ("rack1", "spine"), "node03": ("rack2", "spine")}


def _node(name: str, *states: str, gpus: int = 8, gres_type: str = "") -> SlurmNode:
    return SlurmNode(name=name, gpus=gpus, gres_type=gres_type, states=frozenset(states or ("IDLE",)), reason="")


def _sync(*nodes: SlurmNode) -> set[int]:
    return nodes_sync(nodes=list(nodes), topology=TOPOLOGY, accelerator="H100", sim_now_s=100.0)


def test_nodes_that_join_slurm_appear_with_their_gpus_rack_and_pod() -> None:
    _sync(_node("node01"), _node("node02", gres_type="a100", gpus=4))
    rows = {n.name: n for n in Node.objects.select_related("rack__pod", "accelerator_type")}
    assert sorted(rows) == ["node01", "node02"]
    assert (rows["node01"].gpus, rows["node01"].accelerator_type.name, rows["node01"].rack.name) == (8, "H100", "rack1")
    assert (rows["node02"].gpus, rows["node02"].accelerator_type.name) == (4, "A100")
    _sync(_node("node01"), _node("node02", gres_type="a100", gpus=4), _node("node03"))
    assert Node.objects.get(name="node03").rack.name == "rack2"
    assert Node.objects.get(name="node03").rack.pod.name == "spine"


def test_a_node_that_leaves_slurm_disappears() -> None:
    _sync(_node("node01"), _node("node02"))
    _sync(_node("node01"))
    assert list(Node.objects.values_list("name", flat=True)) == ["node01"]


def test_a_node_slurm_reports_not_responding_is_dead_with_an_incident_and_back_when_it_answers() -> None:
    _sync(_node("node01"), _node("node02"))
    changed = _sync(_node("node01"), _node("node02", "IDLE", "NOT_RESPONDING"))
    node = Node.objects.get(name="node02")
    assert (node.state, node.healthy_gpus) == (Node.State.DOWN, 0)
    incident = Incident.objects.get(pk__in=changed)
    assert (incident.kind, incident.detected_at) == (Incident.Kind.DEAD, 100.0)
    _sync(_node("node01"), _node("node02"))
    node.refresh_from_db()
    assert (node.state, node.healthy_gpus) == (Node.State.UP, 8)
    assert Incident.objects.get(pk=incident.pk).resumed_at is not None


def test_a_node_drained_in_slurm_by_someone_else_shows_as_cordoned() -> None:
    _sync(_node("node01"))
    _sync(SlurmNode(name="node01", gpus=8, gres_type="", states=frozenset({"IDLE", "DRAIN"}), reason="bad fan"))
    assert Node.objects.get(name="node01").state == Node.State.CORDONED


def _steps(start: float, every_s: float, count: int) -> list[tuple[float, float]]:
    return [(start + i * every_s, float(i)) for i in range(count)]


def test_a_node_whose_last_steps_all_took_longer_than_the_gangs_pace_is_slow() -> None:
    progress = {"node01": _steps(0, 0.5, 20), "node02": _steps(0, 0.5, 20), "node03": _steps(0, 1.5, 8)}
    assert progress_slow_nodes(progress, threshold=1.3, steps=5) == {"node03": 3.0}


def test_a_rank_that_stopped_is_not_slow_a_dead_node_is_slurms_to_report() -> None:
    progress = {"node01": _steps(0, 0.5, 40), "node02": _steps(0, 0.5, 10)}  # node02 stopped at 4.5 s
    assert progress_slow_nodes(progress, threshold=1.3, steps=5) == {}


def test_a_gang_at_one_pace_has_no_slow_node() -> None:
    progress = {"node01": _steps(0, 0.5, 20), "node02": _steps(0.1, 0.55, 20)}
    assert progress_slow_nodes(progress, threshold=1.3, steps=5) == {}
