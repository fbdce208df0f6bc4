"""The bulk statements under plan_apply: a guarded update of many rows says which guards held."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.db import connection

from scheduling.bulk_rows import ROWS_PER_STATEMENT, by_ids, pg_array, rows_insert, rows_update
from scheduling.models import Node, Pod, Rack, SchedulerEvent
from tests.factories import AcceleratorTypeFactory


@pytest.fixture
def nodes(db: None) -> list[Node]:
    rack = Rack.objects.create(pod=Pod.objects.create(name="p"), name="r")
    accelerator = AcceleratorTypeFactory(name="H100")
    count = ROWS_PER_STATEMENT + 500  # more than one statement where rows are spelled out
    return Node.objects.bulk_create(
        Node(rack=rack, name=f"n{i:05d}", accelerator_type=accelerator, allocated_gpus=i % 2) for i in range(count)
    )


def test_a_guarded_update_changes_only_the_rows_whose_guard_holds_and_returns_their_ids(nodes: list[Node]) -> None:
    # Every row expects 0 GPUs allocated; only the even ones have that.
    rows = [(node.pk, 0, "cordoned", 3) for node in nodes]  # match, then assign, then add

    updated = rows_update(Node, match=("id", "allocated_gpus"), add=("allocated_gpus",), assign=("state",), rows=rows)

    assert updated == {node.pk for node in nodes[::2]}
    after = dict(Node.objects.values_list("id", "allocated_gpus"))
    assert all(after[node.pk] == (3 if i % 2 == 0 else 1) for i, node in enumerate(nodes))
    assert set(Node.objects.filter(pk__in=updated).values_list("state", flat=True)) == {"cordoned"}
    assert not Node.objects.exclude(pk__in=updated).filter(state="cordoned").exists()


def test_a_query_narrowed_to_many_ids_finds_those_rows_in_one_statement_on_postgresql(nodes: list[Node]) -> None:
    wanted = [node.pk for i, node in enumerate(nodes) if i % 7]  # more than a statement spells out elsewhere

    chunks = list(by_ids(Node.objects.order_by("id").values_list("id", flat=True), wanted))
    found = [pk for chunk in chunks for pk in chunk]

    assert found == wanted
    assert len(chunks) == (1 if connection.vendor == "postgresql" else 2)
    assert list(by_ids(Node.objects.all(), [])) == []


def test_inserted_rows_take_whole_numbers_among_fractions_nulls_and_aware_times(db: None) -> None:
    at = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)

    rows_insert(
        SchedulerEvent,
        columns=("job", "team", "kind", "sim_time_s", "message", "created_at"),
        rows=[(None, None, "started", 0, "a", at), (None, None, "completed", 60.5, "b", at)],
    )

    assert list(SchedulerEvent.objects.order_by("id").values_list("kind", "sim_time_s", "created_at")) == [
        ("started", 0.0, at),
        ("completed", 60.5, at),
    ]


@pytest.mark.parametrize(
    ("db_type", "values"),
    [
        ("bigint", [1, 2**40, -3, None, 0]),
        ("smallint", [8, 0]),
        ("double precision", [0.1, 1e-300, 2.0**60, -0.0, float("inf"), float("-inf"), None, 3]),
        ("varchar(100)", ["a", "b,c", '"', "\\", '\\"', "{x}", "", "NULL", " spaced ", None, "é ✓"]),
        ("text", ["line\nbreak", "tab\there", "'quoted'"]),
    ],
)
def test_a_column_handed_to_postgresql_as_one_array_reads_back_the_same(
    db: None, db_type: str, values: list[object]
) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL's arrays")
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT %s::{db_type}[]", [pg_array(values, db_type)])
        (read,) = cursor.fetchone()

    assert read == values
