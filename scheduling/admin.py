"""The fleet's jobs and the ledger in the Django admin: for reading. Jobs are submitted and
cancelled on the portal's job pages and API; the scheduler writes the rest
(``core.admin.GovernedAdmin``). The hardware's admin is the fleet app's."""

from __future__ import annotations

from django.contrib import admin

from core.admin import GovernedAdmin, GovernedInline
from scheduling.models import (
    Allocation,
    ClusterAccount,
    FleetClock,
    FleetSample,
    Incident,
    Job,
    SchedulerEvent,
    ServingDeployment,
    UsageSample,
)


class AllocationInline(GovernedInline):
    model = Allocation
    raw_id_fields = ["node"]


@admin.register(Job)
class JobAdmin(GovernedAdmin):
    governed_note = (
        "Jobs are submitted and cancelled on the job pages and the API; the scheduler starts, preempts and ends them."
    )
    governed_url_name = "job-list"
    governed_url_text = "Jobs"
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
class ServingDeploymentAdmin(GovernedAdmin):
    governed_note = "Serving deployments are not edited here; the scheduler scales their replicas with demand."
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
class SchedulerEventAdmin(GovernedAdmin):
    list_display = ["id", "sim_time_s", "kind", "job", "team", "message"]
    list_filter = ["kind"]
    raw_id_fields = ["job"]


@admin.register(FleetClock)
class FleetClockAdmin(GovernedAdmin):
    list_display = ["sim_now_s", "ticks", "leader_token", "wall_updated_at"]


@admin.register(UsageSample)
class UsageSampleAdmin(GovernedAdmin):
    governed_note = "The usage ledger is written by the scheduler each tick."
    governed_url_name = "usage-report"
    governed_url_text = "Usage report"
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
class FleetSampleAdmin(GovernedAdmin):
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
class IncidentAdmin(GovernedAdmin):
    governed_note = "Incidents are opened and advanced by failure detection."
    governed_url_name = "incident-list"
    governed_url_text = "Incidents"
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


@admin.register(ClusterAccount)
class ClusterAccountAdmin(admin.ModelAdmin):
    """Which account on the cluster each user's jobs run as, on a real backend: set by admins."""

    list_display = ["user", "username"]
    search_fields = ["user__username", "username"]
    raw_id_fields = ["user"]
