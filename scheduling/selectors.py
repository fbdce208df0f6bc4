"""Read-side queries for the fleet."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Count, Sum

from scheduling.models import Node, Pod, Rack


@dataclass(frozen=True, slots=True)
class FleetSummary:
    pods: int
    racks: int
    nodes: int
    gpus: int
    healthy_gpus: int
    nodes_up: int


def fleet_summary() -> FleetSummary:
    """Size and health of the whole fleet, in three queries."""
    totals = Node.objects.aggregate(
        nodes=Count("id"), gpus=Sum("gpus"), healthy_gpus=Sum("healthy_gpus")
    )
    return FleetSummary(
        pods=Pod.objects.count(),
        racks=Rack.objects.count(),
        nodes=totals["nodes"] or 0,
        gpus=totals["gpus"] or 0,
        healthy_gpus=totals["healthy_gpus"] or 0,
        nodes_up=Node.objects.filter(state=Node.State.UP).count(),
    )
