"""The fleet's hardware: accelerator types, pods (network spine domains), racks and nodes.

Below tenants and scheduling both: a team's quota is counted in an accelerator type and sized
against the GPUs the fleet has installed, and the scheduler places jobs on the nodes. It imports
no other app. The tables keep the names they had in the scheduling app, where these models began.
"""

from __future__ import annotations

from django.db import models


class AcceleratorType(models.Model):
    name = models.CharField(max_length=50, unique=True)
    memory_gb = models.PositiveIntegerField(default=80)

    class Meta:
        ordering = ["name"]
        db_table = "scheduling_acceleratortype"

    def __str__(self) -> str:
        return self.name


class Pod(models.Model):
    """A network spine domain."""

    name = models.CharField(max_length=50, unique=True)

    class Meta:
        ordering = ["name"]
        db_table = "scheduling_pod"

    def __str__(self) -> str:
        return self.name


class Rack(models.Model):
    pod = models.ForeignKey(Pod, on_delete=models.CASCADE, related_name="racks")
    name = models.CharField(max_length=50, unique=True)

    class Meta:
        ordering = ["name"]
        db_table = "scheduling_rack"

    def __str__(self) -> str:
        return self.name


class Node(models.Model):
    class State(models.TextChoices):
        UP = "up", "Up"
        CORDONED = "cordoned", "Cordoned"
        DOWN = "down", "Down"

    rack = models.ForeignKey(Rack, on_delete=models.CASCADE, related_name="nodes")
    name = models.CharField(max_length=50, unique=True)
    accelerator_type = models.ForeignKey(AcceleratorType, on_delete=models.PROTECT, related_name="nodes")
    gpus = models.PositiveSmallIntegerField(default=8)
    healthy_gpus = models.PositiveSmallIntegerField(default=8)
    state = models.CharField(max_length=10, choices=State.choices, default=State.UP)
    allocated_gpus = models.PositiveSmallIntegerField(default=0)
    last_heartbeat = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["name"]
        db_table = "scheduling_node"
        constraints = [
            models.CheckConstraint(
                condition=models.Q(healthy_gpus__lte=models.F("gpus")),
                name="node_healthy_gpus_within_gpus",
            ),
            # The database itself refuses a double-booked node.
            models.CheckConstraint(
                condition=models.Q(allocated_gpus__lte=models.F("gpus")),
                name="node_allocated_gpus_within_gpus",
            ),
        ]

    def __str__(self) -> str:
        return self.name
