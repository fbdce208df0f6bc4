"""The fleet's hardware in the Django admin: for reading. Nodes are cordoned, drained and
uncordoned from the fleet map (``core.admin.GovernedAdmin``)."""

from __future__ import annotations

from django.contrib import admin

from core.admin import GovernedAdmin
from fleet.models import AcceleratorType, Node, Pod, Rack


class HardwareAdmin(GovernedAdmin):
    governed_note = (
        "The fleet's hardware is not edited here; nodes are cordoned, drained and uncordoned "
        "from the fleet map, each action audited."
    )
    governed_url_name = "fleet-map"
    governed_url_text = "Fleet map"


@admin.register(AcceleratorType)
class AcceleratorTypeAdmin(HardwareAdmin):
    list_display = ["name", "memory_gb"]


@admin.register(Pod)
class PodAdmin(HardwareAdmin):
    list_display = ["name"]


@admin.register(Rack)
class RackAdmin(HardwareAdmin):
    list_display = ["name", "pod"]
    list_filter = ["pod"]


@admin.register(Node)
class NodeAdmin(HardwareAdmin):
    list_display = ["name", "rack", "accelerator_type", "gpus", "healthy_gpus", "state"]
    list_filter = ["state", "accelerator_type", "rack__pod"]
    search_fields = ["name"]
