"""The fleet admin's node actions: cordon (no new work), uncordon (back in service), drain (cordon,
and every gang on the node leaves now, back to its last checkpoint). Audited. The cycle's failure
step (`scheduling.cycle.failures`) does the same to the nodes it finds dead or slow."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import transaction

from scheduling.cycle.causes import NODE_DRAINED, Cause
from scheduling.cycle.failures import job_requeue_at, jobs_running_on
from scheduling.models import Allocation, Job, Node
from tenants.services.audit import audit_record

NODE_ACTIONS = ("cordon", "uncordon", "drain")
# The actions that apply to a node in each state: an up node can be cordoned or drained, a
# cordoned one uncordoned or drained, a down one only put back in service (once repaired).
NODE_ACTIONS_BY_STATE: dict[str, tuple[str, ...]] = {
    Node.State.UP: ("cordon", "drain"),
    Node.State.CORDONED: ("uncordon", "drain"),
    Node.State.DOWN: ("uncordon",),
}


def node_action_states() -> list[tuple[str, tuple[str, ...]]]:
    """Each action, with the node states it applies to (for a page to offer only those)."""
    return [
        (action, tuple(state for state, actions in NODE_ACTIONS_BY_STATE.items() if action in actions))
        for action in NODE_ACTIONS
    ]


@dataclass(frozen=True, slots=True)
class DrainEviction:
    """A job a drain of a node would evict, with the GPUs it holds there."""

    job_id: int
    name: str
    team: str
    gpus_on_node: int
    gpus: int


def node_drain_evictions(*, node_id: int | None = None) -> dict[int, list[DrainEviction]]:
    """Per node (or for the one node), the running jobs a drain would send back to their
    checkpoints, by job id. One query."""
    allocations = Allocation.objects.filter(job__state=Job.State.RUNNING)
    if node_id is not None:
        allocations = allocations.filter(node_id=node_id)
    evictions: dict[int, list[DrainEviction]] = {}
    for node, job_id, name, team, on_node, gpus in allocations.order_by("node_id", "job_id").values_list(
        "node_id", "job_id", "job__name", "job__team__name", "gpus", "job__gpus"
    ):
        evictions.setdefault(node, []).append(DrainEviction(job_id, name, team, on_node, gpus))
    return evictions


class DrainChanged(Exception):
    """The jobs on the node are not the ones the admin confirmed evicting: nothing was done."""


@transaction.atomic
def node_action(
    *, node: Node, action: str, actor: Any, sim_now_s: float, confirmed_evictions: set[int] | None = None
) -> Node:
    """Cordon (no new work), uncordon (back in service), drain (cordon, and every gang on the node
    leaves now, back to its last checkpoint). Audited. With ``confirmed_evictions`` (the job ids
    the admin was shown), a drain goes ahead only if exactly those jobs run on the node, under the
    node's lock; else it raises ``DrainChanged`` before writing anything."""
    node = Node.objects.select_for_update().get(pk=node.pk)
    if action == "drain" and confirmed_evictions is not None:
        if {job.pk for job in jobs_running_on(node.pk)} != confirmed_evictions:
            raise DrainChanged(node.name)
    before = {"state": node.state, "healthy_gpus": node.healthy_gpus}
    if action in ("cordon", "drain") and node.state == Node.State.UP:
        node.state = Node.State.CORDONED
    elif action == "uncordon":
        if node.state == Node.State.DOWN:  # repaired: whole again, heartbeating from the next tick
            node.healthy_gpus, node.last_heartbeat = node.gpus, None
        node.state = Node.State.UP
    node.save(update_fields=["state", "healthy_gpus", "last_heartbeat"])
    if action == "drain":
        for job in jobs_running_on(node.pk):
            job_requeue_at(job, sim_now_s, cause=Cause(NODE_DRAINED, node.name, None, node.pk), now_s=sim_now_s)
    audit_record(
        actor=actor,
        kind=f"node.{action}",
        object_repr=f"node {node.name}",
        before=before,
        after={"state": node.state, "healthy_gpus": node.healthy_gpus},
    )
    return node
