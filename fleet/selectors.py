"""Read-side queries of the fleet's hardware."""

from __future__ import annotations

from django.db.models import Sum

from fleet.models import Node


def fleet_gpus_by_type() -> dict[int, int]:
    """Installed GPUs per accelerator type id, healthy or not: what guarantees are sized against."""
    rows = Node.objects.values("accelerator_type_id").annotate(gpus=Sum("gpus")).order_by()
    return {row["accelerator_type_id"]: row["gpus"] or 0 for row in rows}
