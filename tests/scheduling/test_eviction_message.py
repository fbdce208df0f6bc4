"""An eviction's history line says what was rolled back in a unit that never reads as nothing
when work was lost ("0.0 GPU-h"), and a start names its nodes in words ("1 node", "2 nodes")."""

from __future__ import annotations

import pytest

from scheduling.cycle.apply import _nodes, eviction_message
from scheduling.cycle.causes import NODE_FAILED, Cause

FAILED = Cause(NODE_FAILED, node_name="r1-n1")


@pytest.mark.parametrize(
    ("kept_s", "lost_gpu_s", "said"),
    [
        (120.0, 0.0, "no work rolled back"),
        (120.0, 90.0, "2 GPU-min rolled back"),
        (120.0, 10.0, "1 GPU-min rolled back"),
        (120.0, 300.0, "5 GPU-min rolled back"),
        (120.0, 5400.0, "1.5 GPU-h rolled back"),
        (0.0, 1440.0, "requeued to start over; 0.4 GPU-h rolled back to its start"),
        (0.0, 0.0, "requeued to start over; no work rolled back"),
    ],
)
def test_the_work_rolled_back_is_never_shown_as_zero_when_some_was_lost(
    kept_s: float, lost_gpu_s: float, said: str
) -> None:
    message = eviction_message(FAILED, kept_s, lost_gpu_s)

    assert message.startswith("Evicted by node failure on node r1-n1, requeued")
    assert message.endswith(said)
    assert "0.0 GPU-h" not in message


def test_a_start_names_its_nodes_in_words() -> None:
    assert (_nodes(1), _nodes(2)) == ("1 node", "2 nodes")
