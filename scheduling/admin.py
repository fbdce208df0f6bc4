from __future__ import annotations

from django.contrib import admin

from scheduling.models import (
    AcceleratorType,
    Allocation,
    FleetClock,
    FleetSample,
    Incident,
    Job,
    Node,
    Pod,
    Rack,
    SchedulerEvent,
    ServingDeployment,
    UsageSample,
)


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


class AllocationInline(admin.TabularInline):
    model = Allocation
    extra = 0
    raw_id_fields = ["node"]


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    list_display = [
        "id",
        "name",
        "team",
        "kind",
        "priority_class",
        "gpus",
        "accelerator_type",
        "state",
    ]
    list_filter = ["state", "kind", "team", "accelerator_type"]
    search_fields = ["name"]
    raw_id_fields = ["submitted_by", "deployment"]
    inlines = [AllocationInline]


@admin.register(ServingDeployment)
class ServingDeploymentAdmin(admin.ModelAdmin):
    list_display = [
        "name",
        "team",
        "accelerator_type",
        "gpus_per_replica",
        "min_replicas",
        "max_replicas",
        "peak_hour",
        "active",
    ]


@admin.register(SchedulerEvent)
class SchedulerEventAdmin(admin.ModelAdmin):
    list_display = ["id", "sim_time_s", "kind", "job", "team", "message"]
    list_filter = ["kind"]
    raw_id_fields = ["job"]


@admin.register(FleetClock)
class FleetClockAdmin(admin.ModelAdmin):
    list_display = ["sim_now_s", "ticks", "leader_token", "wall_updated_at"]


@admin.register(UsageSample)
class UsageSampleAdmin(admin.ModelAdmin):
    list_display = [
        "recorded_at",
        "team",
        "accelerator_type",
        "kind",
        "allocated_gpu_s",
        "useful_gpu_s",
        "lost_gpu_s",
        "borrowed_gpu_s",
    ]
    list_filter = ["team", "kind"]


@admin.register(FleetSample)
class FleetSampleAdmin(admin.ModelAdmin):
    list_display = [
        "recorded_at",
        "sim_time_s",
        "capacity_gpus",
        "healthy_gpus",
        "serving_gpus",
        "training_gpus",
        "batch_gpus",
        "pending_jobs",
    ]


@admin.register(Incident)
class IncidentAdmin(admin.ModelAdmin):
    list_display = (
        "id",
        "node",
        "kind",
        "failed_at",
        "detected_at",
        "replaced_at",
        "restored_at",
        "resumed_at",
        "lost_gpu_s",
    )
    list_filter = ("kind",)
    raw_id_fields = ("node", "jobs")
