"""The fleet's hardware moved from the scheduling app to the fleet app without touching a row: a
database migrated before the move keeps its accelerator types, pods, racks and nodes, and the jobs,
allocations, quotas and rates that point at them, read through the fleet app after it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.state import StateApps

from fleet.models import AcceleratorType, Node, Pod, Rack

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [
    ("scheduling", "0012_usage_lost_split"),
    ("tenants", "0031_job_failed_notice_words"),
    ("finance", "0001_initial"),
    ("fleet", None),
]


def _leaves() -> list[tuple[str, str]]:
    return MigrationExecutor(connection).loader.graph.leaf_nodes()


@pytest.fixture
def before_the_move() -> Iterator[StateApps]:
    """The database as the release before the move left it (its models as they were then); the
    latest schema again afterwards, for the tests that follow."""
    leaves = _leaves()
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    try:
        yield MigrationExecutor(connection).loader.project_state([node for node in BEFORE if node[1]]).apps
    finally:
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate(leaves)


def test_the_hardware_and_everything_pointing_at_it_survive_the_move(before_the_move: StateApps) -> None:
    old = before_the_move
    h100 = old.get_model("scheduling", "AcceleratorType").objects.create(name="H100", memory_gb=80)
    pod = old.get_model("scheduling", "Pod").objects.create(name="pod-a")
    rack = old.get_model("scheduling", "Rack").objects.create(name="rack-a1", pod=pod)
    node = old.get_model("scheduling", "Node").objects.create(
        name="node-a1-01", rack=rack, accelerator_type=h100, gpus=8, healthy_gpus=7
    )
    department = old.get_model("tenants", "Department").objects.create(name="Research")
    team = old.get_model("tenants", "Team").objects.create(name="Vision", slug="vision", department=department)
    old.get_model("tenants", "Quota").objects.create(team=team, accelerator_type=h100, guaranteed=8)

    executor = MigrationExecutor(connection)
    executor.migrate(_leaves())

    moved = Node.objects.select_related("rack__pod", "accelerator_type").get()
    assert (moved.pk, moved.name, moved.gpus, moved.healthy_gpus) == (node.pk, "node-a1-01", 8, 7)
    assert (moved.rack.name, moved.rack.pod.name, moved.accelerator_type.name) == ("rack-a1", "pod-a", "H100")
    assert list(AcceleratorType.objects.get().quotas.values_list("team__slug", "guaranteed")) == [("vision", 8)]
    assert (Pod.objects.count(), Rack.objects.count()) == (1, 1)


def test_the_fleet_app_keeps_the_tables_it_was_given() -> None:
    tables = {model._meta.db_table for model in (AcceleratorType, Pod, Rack, Node)}

    assert tables == {"scheduling_acceleratortype", "scheduling_pod", "scheduling_rack", "scheduling_node"}
    assert tables <= set(connection.introspection.table_names())
