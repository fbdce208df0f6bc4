from __future__ import annotations

from scheduling.engine import Cordon, Node, Requeue

from .builders import Scenario, job, running, started


def test_a_node_without_healthy_gpus_is_cordoned() -> None:
    nodes = (Node("dead", "p", "r", "a100", 8, 0), Node("ok", "p", "r", "a100"))
    plan = Scenario(nodes).plan()

    assert plan.of_type(Cordon) == (Cordon("dead", "no-healthy-gpus"),)


def test_jobs_on_a_node_that_lost_gpus_they_use_are_requeued_and_only_its_healthy_gpus_stay_usable() -> None:
    nodes = (Node("sick", "p", "r", "a100", 8, 6), Node("ok", "p", "r", "a100"))
    scenario = Scenario(nodes).with_running(running(job("victim", 8), on="sick"))
    plan = scenario.pending(job("next", 8), job("small", 6, submit_s=1)).plan()

    assert plan.of_type(Requeue) == (Requeue("victim", "node-degraded"),)
    assert started(plan) == {"next": (("ok", 8),), "small": (("sick", 6),)}


def test_a_cordoned_node_keeps_its_jobs_but_takes_no_new_ones() -> None:
    nodes = (Node("drain", "p", "r", "a100", 8, 8, cordoned=True),)
    scenario = Scenario(nodes).with_running(running(job("stays", 4), on="drain"))
    plan = scenario.pending(job("new", 2)).plan()

    assert plan.of_type(Requeue) == ()
    assert started(plan) == {}
