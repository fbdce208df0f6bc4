"""What-if replays: a trace (uploaded, or the fleet's own recent jobs) replayed by the simulator
under a chosen policy beside the fleet's current one, as a Celery task on the ``simulations``
queue."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Simulation(models.Model):
    class Source(models.TextChoices):
        TRACE = "trace", "Uploaded trace file"
        HISTORY = "history", "The fleet's own recent jobs"

    class State(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        SUCCEEDED = "succeeded", "Succeeded"
        FAILED = "failed", "Failed"
        CANCELLED = "cancelled", "Cancelled"

    FINISHED_STATES = (State.SUCCEEDED, State.FAILED, State.CANCELLED)

    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="simulations"
    )
    # A lead's replay belongs to their team (its jobs only, seen by the team's leads); a fleet
    # admin's may cover the whole fleet (no team).
    team = models.ForeignKey(
        "tenants.Team", on_delete=models.CASCADE, null=True, blank=True, related_name="simulations"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    source = models.CharField(max_length=10, choices=Source.choices)
    trace_name = models.CharField(max_length=200, blank=True)
    trace_format = models.CharField(max_length=10, blank=True)
    # The uploaded file's text; for a replay of the fleet's history, its jobs as the request saw
    # them (JSON), so that the replay does not depend on when a worker runs it.
    trace_text = models.TextField(blank=True, editable=False)
    history_days = models.FloatField(null=True, blank=True)
    jobs = models.PositiveIntegerField(default=0, help_text="Jobs in the trace.")
    preset = models.CharField(max_length=20)
    policy_settings = models.JSONField(default=dict, blank=True, help_text="Overrides of the preset's policy.")
    fleet_spec = models.CharField(max_length=100, help_text="PODSxRACKSxNODESxGPUS[:accelerator], + between groups.")
    seed = models.IntegerField(default=0)

    state = models.CharField(max_length=10, choices=State.choices, default=State.QUEUED)
    progress = models.FloatField(default=0.0)
    cancel_requested = models.BooleanField(default=False)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True)
    # {"meta": ..., "candidate": {metrics}, "current": {metrics}}: the simulator's JSON contract.
    results = models.JSONField(null=True, blank=True)
    # The simulator's HTML report, zlib-compressed (it loads plotly.js from
    # the site; older reports have it inlined).
    report_html_z = models.BinaryField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["-id"]
        indexes = [models.Index(fields=["team", "id"], name="simulation_team_idx")]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(progress__gte=0.0) & models.Q(progress__lte=1.0), name="simulation_progress_bounded"
            ),
        ]

    def __str__(self) -> str:
        return f"Simulation #{self.pk} ({self.preset}, {self.state})"

    @property
    def finished(self) -> bool:
        return self.state in self.FINISHED_STATES
