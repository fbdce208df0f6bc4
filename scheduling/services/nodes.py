"""The fleet admin's node actions: cordon (no new work), uncordon (back in service), drain (cordon,
and every gang on the node leaves now, back to its last checkpoint). Audited. The cycle's failure
step (`scheduling.cycle.failures`) does the same to the nodes it finds dead or slow."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from scheduling.cycle.failures import job_requeue_at, jobs_running_on
from scheduling.models import Node
from tenants.services.audit import audit_record

NODE_ACTIONS = ("cordon", "uncordon", "drain")


@transaction.atomic
def node_action(*, node: Node, action: str, actor: Any, sim_now_s: float) -> Node:
    """Cordon (no new work), uncordon (back in service), drain (cordon, and every gang on the node
    leaves now, back to its last checkpoint). Audited."""
    node = Node.objects.select_for_update().get(pk=node.pk)
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
            job_requeue_at(job, sim_now_s)
    audit_record(
        actor=actor,
        kind=f"node.{action}",
        object_repr=f"node {node.name}",
        before=before,
        after={"state": node.state, "healthy_gpus": node.healthy_gpus},
    )
    return node
