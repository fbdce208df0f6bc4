from __future__ import annotations

from django.contrib import admin

from scheduling.models import AcceleratorType, Node, Pod, Rack


@admin.register(AcceleratorType)
class AcceleratorTypeAdmin(admin.ModelAdmin):
    list_display = ["name", "memory_gb"]


@admin.register(Pod)
class PodAdmin(admin.ModelAdmin):
    list_display = ["name"]


@admin.register(Rack)
class RackAdmin(admin.ModelAdmin):
    list_display = ["name", "pod"]
    list_filter = ["pod"]


@admin.register(Node)
class NodeAdmin(admin.ModelAdmin):
    list_display = ["name", "rack", "accelerator_type", "gpus", "healthy_gpus", "state"]
    list_filter = ["state", "accelerator_type", "rack__pod"]
    search_fields = ["name"]
