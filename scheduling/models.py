"""The modelled fleet: accelerator types and the pod -> rack -> node topology."""

from __future__ import annotations

from django.db import models


class AcceleratorType(models.Model):
    name = models.CharField(max_length=50, unique=True)
    memory_gb = models.PositiveIntegerField(default=80)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Pod(models.Model):
    """A network spine domain."""

    name = models.CharField(max_length=50, unique=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Rack(models.Model):
    pod = models.ForeignKey(Pod, on_delete=models.CASCADE, related_name="racks")
    name = models.CharField(max_length=50, unique=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Node(models.Model):
    class State(models.TextChoices):
        UP = "up", "Up"
        CORDONED = "cordoned", "Cordoned"
        DOWN = "down", "Down"

    rack = models.ForeignKey(Rack, on_delete=models.CASCADE, related_name="nodes")
    name = models.CharField(max_length=50, unique=True)
    accelerator_type = models.ForeignKey(
        AcceleratorType, on_delete=models.PROTECT, related_name="nodes"
    )
    gpus = models.PositiveSmallIntegerField(default=8)
    healthy_gpus = models.PositiveSmallIntegerField(default=8)
    state = models.CharField(max_length=10, choices=State.choices, default=State.UP)
    last_heartbeat = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(healthy_gpus__lte=models.F("gpus")),
                name="node_healthy_gpus_within_gpus",
            ),
        ]

    def __str__(self) -> str:
        return self.name
