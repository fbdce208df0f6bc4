"""The fleet's jobs and allocations, the fleet clock, serving deployments, and the usage ledger.
The hardware they run on (accelerator types, pods, racks, nodes) is the fleet app's, below tenants
and scheduling both; it is imported here for the scheduler's modules that read it with the rest."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator
from django.db import models
from django.utils.deconstruct import deconstructible

from fleet.models import AcceleratorType, Node
from fleet.models import Pod as Pod
from fleet.models import Rack as Rack
from scheduling.engine.vocabulary import JOB_STATE_LABELS, KIND_LABELS, LEVEL_LABELS
from scheduling.limits import (
    MAX_CHECKPOINT_GB,
    MAX_CHECKPOINT_INTERVAL_S,
    MAX_COMMAND_CHARS,
    MAX_DEMAND_PERIOD_H,
    MAX_DURATION_S,
    MAX_GANG_GPUS,
    MAX_TIME_LIMIT_S,
    MIN_CHECKPOINT_INTERVAL_S,
    range_problem,
)

IDEMPOTENCY_KEY_MAX_LENGTH = 255


@deconstructible
class Bounded:
    """A field validator for the bounds in ``scheduling.limits``: refuses NaN and infinities
    (which plain min/max validators let through) and anything outside the range."""

    def __init__(self, *, maximum: float, minimum: float | None = None, positive: bool = False, unit: str = "") -> None:
        self.maximum, self.minimum, self.positive, self.unit = maximum, minimum, positive, unit

    def __call__(self, value: float | None) -> None:
        if value is None:
            return
        problem = range_problem(
            value, maximum=self.maximum, minimum=self.minimum, positive=self.positive, unit=self.unit
        )
        if problem:
            raise ValidationError(f"Must {problem.removeprefix('must ')}.", code="out_of_range")

    def _key(self) -> tuple[float, float | None, bool, str]:
        return (self.maximum, self.minimum, self.positive, self.unit)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Bounded) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())


GANG_GPUS = Bounded(minimum=1, maximum=MAX_GANG_GPUS, unit="GPUs")


def _within(
    field: str, *, maximum: float, minimum: float = 0, nullable: bool = False, strict: bool = False
) -> models.Q:
    """``minimum <= field <= maximum`` (``minimum < field`` with ``strict``), as a check constraint.
    It refuses infinities and, on PostgreSQL, NaN too, which sorts above every number there."""
    low = {f"{field}__gt" if strict else f"{field}__gte": minimum}
    within = models.Q(**low) & models.Q(**{f"{field}__lte": maximum})
    return models.Q(**{f"{field}__isnull": True}) | within if nullable else within


class Level(models.TextChoices):
    """Topology domains, smallest first (the engine's vocabulary: a code it lacks fails here)."""

    NODE = "node", LEVEL_LABELS["node"]
    RACK = "rack", LEVEL_LABELS["rack"]
    POD = "pod", LEVEL_LABELS["pod"]
    FLEET = "fleet", LEVEL_LABELS["fleet"]


class JobKind(models.TextChoices):
    TRAINING = "training", KIND_LABELS["training"]
    SERVING = "serving", KIND_LABELS["serving"]
    BATCH = "batch", KIND_LABELS["batch"]


class FleetClock(models.Model):
    """The simulated fleet clock and the fencing token of the cycle leader (one row, pk=1)."""

    sim_now_s = models.FloatField(default=0.0)
    wall_updated_at = models.DateTimeField(null=True, blank=True)
    leader_token = models.BigIntegerField(default=0)
    ticks = models.BigIntegerField(default=0)
    # The calendar instant of fleet second 0 (``scheduling.fleet_calendar``), fixed by the
    # ledger's first tick.
    epoch = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"fleet clock at {self.sim_now_s:.0f} s"


class ServingDeployment(models.Model):
    """A serving service whose replica count follows a demand curve.

    Demand is diurnal: ``min_replicas`` at the trough and ``max_replicas`` at ``peak_hour``
    (fleet-clock hours), a cosine in between. Each replica is a serving job of
    ``gpus_per_replica`` GPUs.
    """

    team = models.ForeignKey("tenants.Team", on_delete=models.CASCADE, related_name="deployments")
    name = models.CharField(max_length=100, unique=True)
    priority_class = models.ForeignKey("tenants.PriorityClass", on_delete=models.PROTECT)
    accelerator_type = models.ForeignKey(AcceleratorType, on_delete=models.PROTECT)
    gpus_per_replica = models.PositiveSmallIntegerField(default=8)
    min_replicas = models.PositiveSmallIntegerField(default=1)
    max_replicas = models.PositiveSmallIntegerField(default=4)
    peak_hour = models.FloatField(default=14.0, validators=[Bounded(minimum=0, maximum=MAX_DEMAND_PERIOD_H, unit="h")])
    period_h = models.FloatField(
        default=24.0, validators=[Bounded(positive=True, maximum=MAX_DEMAND_PERIOD_H, unit="h")]
    )
    active = models.BooleanField(default=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(min_replicas__lte=models.F("max_replicas")),
                name="deployment_min_replicas_within_max",
            ),
            models.CheckConstraint(
                condition=_within("peak_hour", maximum=MAX_DEMAND_PERIOD_H), name="deployment_peak_hour_bounded"
            ),
            models.CheckConstraint(
                condition=_within("period_h", maximum=MAX_DEMAND_PERIOD_H, strict=True),
                name="deployment_period_bounded",
            ),
        ]

    def __str__(self) -> str:
        return self.name


class Job(models.Model):
    class State(models.TextChoices):
        PENDING = "pending", JOB_STATE_LABELS["pending"]
        RUNNING = "running", JOB_STATE_LABELS["running"]
        COMPLETED = "completed", JOB_STATE_LABELS["completed"]
        CANCELLED = "cancelled", JOB_STATE_LABELS["cancelled"]
        TIMED_OUT = "timed_out", JOB_STATE_LABELS["timed_out"]
        FAILED = "failed", JOB_STATE_LABELS["failed"]

    ACTIVE_STATES = (State.PENDING, State.RUNNING)

    # Every index on this table is written by each submission and each start (a start changes the
    # indexed state, so its update is never heap-only): the table keeps only the indexes its hot
    # queries use (``benchmarks/README.md``, the placement burst). The team's jobs are found by
    # ``job_team_state_idx``; jobs are never looked up by priority class or accelerator type (only
    # deleting one of those, a rare admin act, scans); a deployment's replicas by a partial index.
    team = models.ForeignKey("tenants.Team", on_delete=models.PROTECT, related_name="jobs", db_index=False)
    submitted_by = models.ForeignKey("auth.User", on_delete=models.SET_NULL, null=True, blank=True, related_name="jobs")
    deployment = models.ForeignKey(
        ServingDeployment, on_delete=models.CASCADE, null=True, blank=True, related_name="replicas", db_index=False
    )
    name = models.CharField(max_length=200)
    kind = models.CharField(max_length=10, choices=JobKind.choices, default=JobKind.TRAINING)
    priority_class = models.ForeignKey("tenants.PriorityClass", on_delete=models.PROTECT, db_index=False)
    accelerator_type = models.ForeignKey(AcceleratorType, on_delete=models.PROTECT, db_index=False)
    gpus = models.PositiveIntegerField(validators=[GANG_GPUS])
    min_gpus = models.PositiveIntegerField(null=True, blank=True, validators=[GANG_GPUS])
    max_gpus = models.PositiveIntegerField(null=True, blank=True, validators=[GANG_GPUS])
    duration_s = models.FloatField(
        help_text="Work at full size, in fleet seconds.",
        validators=[Bounded(positive=True, maximum=MAX_DURATION_S, unit="s")],
    )
    time_limit_s = models.FloatField(
        null=True, blank=True, validators=[Bounded(positive=True, maximum=MAX_TIME_LIMIT_S, unit="s")]
    )
    checkpoint_interval_s = models.FloatField(
        null=True,
        blank=True,
        validators=[Bounded(minimum=MIN_CHECKPOINT_INTERVAL_S, maximum=MAX_CHECKPOINT_INTERVAL_S, unit="s")],
    )
    checkpoint_gb = models.FloatField(
        default=0.0, validators=[Bounded(minimum=0, maximum=MAX_CHECKPOINT_GB, unit="GB")]
    )
    checkpoint_on_preempt = models.BooleanField(
        default=False,
        help_text="The job writes a checkpoint when told it is preempted: a preemption costs it only the "
        "grace period, not the work since its last periodic checkpoint.",
    )
    required_level = models.CharField(max_length=5, choices=Level.choices, blank=True)
    preferred_level = models.CharField(max_length=5, choices=Level.choices, blank=True)

    state = models.CharField(max_length=10, choices=State.choices, default=State.PENDING)
    version = models.PositiveIntegerField(default=0)
    submit_s = models.FloatField()
    started_s = models.FloatField(null=True, blank=True)
    finished_s = models.FloatField(null=True, blank=True)
    # Progress is stored as an anchor: work done at anchor_s; between changes it grows at the
    # rate the engine derives from size and placement level, so ticks need not rewrite it.
    anchor_s = models.FloatField(null=True, blank=True)
    anchor_progress_s = models.FloatField(default=0.0)
    base_progress_s = models.FloatField(default=0.0, help_text="Progress this run restored from.")
    saved_progress_s = models.FloatField(default=0.0, help_text="Last checkpoint, for restarts.")
    attained_gpu_s = models.FloatField(default=0.0)
    # Its last eviction was a node failure's (not a preemption's): the engine puts it back ahead of
    # its class's new work and lets it spread at once (`engine.Job.requeued_by_failure`).
    requeued_by_failure = models.BooleanField(default=False, editable=False)
    borrowing = models.BooleanField(default=False)
    placement_level = models.CharField(max_length=5, choices=Level.choices, blank=True)
    grace_until_s = models.FloatField(null=True, blank=True)
    restarts = models.PositiveIntegerField(default=0)
    # The first estimate the job was shown (``scheduling.estimates``): by the first cycle that left
    # it waiting, at ``first_estimate_at_s``; the start it gave (null: none could be given) and the
    # range shown with it. Never changed after, so the pages can say how far the estimate moved.
    first_estimate_at_s = models.FloatField(null=True, blank=True, editable=False)
    first_estimate_s = models.FloatField(null=True, blank=True, editable=False)
    first_estimate_low_s = models.FloatField(null=True, blank=True, editable=False)
    first_estimate_high_s = models.FloatField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    # Real execution (``scheduling.backends``): what runs, as whom, and what the cluster said.
    # ``command`` is data: the backend hands it to a fixed wrapper on the nodes, never pasting it
    # into a shell line of its own. Empty for modelled jobs.
    command = models.TextField(blank=True, default="", max_length=MAX_COMMAND_CHARS)
    cluster_account = models.CharField(max_length=64, blank=True, default="", editable=False)
    backend_job_id = models.CharField(max_length=64, blank=True, default="", editable=False)
    exit_code = models.IntegerField(null=True, blank=True, editable=False)
    # A client's ``Idempotency-Key`` for the submission that made this job, and a digest of
    # that submission: a retry with the same key gets this job back instead of a second one.
    # Empty when the client sent no key: only non-empty keys are unique per submitter.
    idempotency_key = models.CharField(max_length=IDEMPOTENCY_KEY_MAX_LENGTH, blank=True, default="", editable=False)
    idempotency_digest = models.CharField(max_length=64, blank=True, default="", editable=False)

    class Meta:
        ordering = ["-id"]
        indexes = [
            models.Index(fields=["state"], name="job_state_idx"),
            models.Index(fields=["team", "state"], name="job_team_state_idx"),
            # Serving replicas only: training and batch jobs never enter it.
            models.Index(
                fields=["deployment"], condition=models.Q(deployment__isnull=False), name="job_deployment_idx"
            ),
            # The latest first estimates, which calibrate the ranges shown (`scheduling.estimates`).
            models.Index(
                fields=["-first_estimate_at_s"],
                condition=models.Q(first_estimate_s__isnull=False),
                name="job_first_estimate_idx",
            ),
            # The waiting jobs never shown an estimate, which the next tick gives their first.
            models.Index(
                fields=["id"],
                condition=models.Q(state="pending", first_estimate_at_s__isnull=True),
                name="job_unestimated_idx",
            ),
        ]
        constraints = [
            models.CheckConstraint(condition=models.Q(gpus__gte=1), name="job_gpus_positive"),
            models.CheckConstraint(
                condition=models.Q(min_gpus__isnull=True) | models.Q(min_gpus__lte=models.F("gpus")),
                name="job_min_gpus_within_gpus",
            ),
            # The bounds of scheduling.limits, kept by the database too.
            models.CheckConstraint(
                condition=_within("gpus", minimum=1, maximum=MAX_GANG_GPUS), name="job_gpus_bounded"
            ),
            models.CheckConstraint(
                condition=_within("min_gpus", minimum=1, maximum=MAX_GANG_GPUS, nullable=True),
                name="job_min_gpus_bounded",
            ),
            models.CheckConstraint(
                condition=_within("max_gpus", minimum=1, maximum=MAX_GANG_GPUS, nullable=True),
                name="job_max_gpus_bounded",
            ),
            models.CheckConstraint(
                condition=_within("duration_s", maximum=MAX_DURATION_S, strict=True), name="job_duration_bounded"
            ),
            models.CheckConstraint(
                condition=_within("time_limit_s", maximum=MAX_TIME_LIMIT_S, strict=True, nullable=True),
                name="job_time_limit_bounded",
            ),
            models.CheckConstraint(
                condition=_within(
                    "checkpoint_interval_s",
                    minimum=MIN_CHECKPOINT_INTERVAL_S,
                    maximum=MAX_CHECKPOINT_INTERVAL_S,
                    nullable=True,
                ),
                name="job_checkpoint_interval_bounded",
            ),
            models.CheckConstraint(
                condition=_within("checkpoint_gb", maximum=MAX_CHECKPOINT_GB), name="job_checkpoint_gb_bounded"
            ),
            models.UniqueConstraint(
                fields=["submitted_by", "idempotency_key"],
                condition=~models.Q(idempotency_key=""),
                name="job_idempotency_key_unique_per_submitter",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} (#{self.pk})"


class Allocation(models.Model):
    """GPUs of one node held by one running job."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="allocations")
    node = models.ForeignKey(Node, on_delete=models.PROTECT, related_name="allocations")
    gpus = models.PositiveSmallIntegerField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["job", "node"], name="allocation_unique_job_node"),
        ]

    def __str__(self) -> str:
        return f"{self.gpus} GPUs of node {self.node_id} for job {self.job_id}"


class SchedulerEvent(models.Model):
    class Kind(models.TextChoices):
        SUBMITTED = "submitted", "Submitted"
        STARTED = "started", "Started"
        COMPLETED = "completed", "Completed"
        TIMED_OUT = "timed_out", "Timed out"
        FAILED = "failed", "Failed"
        PREEMPTING = "preempting", "Preemption requested"
        EVICTED = "evicted", "Evicted"
        RESIZED = "resized", "Resized"
        CANCELLED = "cancelled", "Cancelled"
        RESERVED = "reserved", "Reserved"

    job = models.ForeignKey(Job, on_delete=models.CASCADE, null=True, related_name="events")
    team = models.ForeignKey("tenants.Team", on_delete=models.CASCADE, null=True)
    kind = models.CharField(max_length=12, choices=Kind.choices)
    sim_time_s = models.FloatField()
    message = models.CharField(max_length=300, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    # Why a job left its GPUs or is told to (evicted, preemption requested): "preempted-by:<job id>",
    # "preempted", "node-failed", "node-degraded", "node-slow", "node-drained" or "requeued"
    # (`scheduling.cycle.causes`); empty for other events.
    cause = models.CharField(max_length=40, blank=True, default="", db_default="")
    # The failure behind the event and the node it names, where there is one.
    incident = models.ForeignKey(
        "Incident", on_delete=models.SET_NULL, null=True, blank=True, related_name="job_events"
    )
    node = models.ForeignKey(Node, on_delete=models.SET_NULL, null=True, blank=True, related_name="job_events")

    class Meta:
        ordering = ["-id"]
        indexes = [models.Index(fields=["job", "id"], name="event_job_idx")]

    def __str__(self) -> str:
        return f"{self.kind} at {self.sim_time_s:.0f} s"


class TeamUsage(models.Model):
    """Decayed GPU-seconds a team has used, for fair share (Slurm-style half-life decay)."""

    team = models.OneToOneField("tenants.Team", on_delete=models.CASCADE, related_name="usage")
    decayed_gpu_s = models.FloatField(default=0.0)
    as_of_s = models.FloatField(default=0.0)

    def __str__(self) -> str:
        return f"{self.decayed_gpu_s:.0f} GPU-s at {self.as_of_s:.0f} s"


class UsageSample(models.Model):
    """One tick's GPU-seconds for one team, accelerator type and job kind: the finance ledger."""

    sim_time_s = models.FloatField()
    interval_s = models.FloatField()
    recorded_at = models.DateTimeField()
    team = models.ForeignKey("tenants.Team", on_delete=models.CASCADE, related_name="usage_samples")
    accelerator_type = models.ForeignKey(AcceleratorType, on_delete=models.PROTECT)
    kind = models.CharField(max_length=10, choices=JobKind.choices)
    allocated_gpu_s = models.FloatField(default=0.0)
    useful_gpu_s = models.FloatField(default=0.0)
    lost_gpu_s = models.FloatField(default=0.0)
    borrowed_gpu_s = models.FloatField(default=0.0)
    # Lost, split by why (``scheduling.cycle.ledger._charge``); rows written before the split
    # hold zeros here, and their lost is the unsplit remainder.
    lost_restore_gpu_s = models.FloatField(default=0.0)
    lost_topology_gpu_s = models.FloatField(default=0.0)
    lost_evicted_gpu_s = models.FloatField(default=0.0)
    lost_failed_gpu_s = models.FloatField(default=0.0)

    class Meta:
        indexes = [
            models.Index(fields=["recorded_at"], name="usage_recorded_idx"),
            models.Index(fields=["sim_time_s"], name="usage_sim_time_idx"),
        ]

    def __str__(self) -> str:
        return f"usage at {self.sim_time_s:.0f} s"


class JobUsage(models.Model):
    """One job's GPU-seconds on one fleet calendar day (the day its ticks end on): the per-job
    ledger behind the per-job detail. The tick adds to it in one upsert; it sums to the
    ``UsageSample`` rows of the same ticks. ``useful + lost = allocated`` on every row."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="usage_days")
    day = models.DateField()
    team = models.ForeignKey("tenants.Team", on_delete=models.CASCADE, related_name="job_usage")
    accelerator_type = models.ForeignKey(AcceleratorType, on_delete=models.PROTECT)
    kind = models.CharField(max_length=10, choices=JobKind.choices)
    allocated_gpu_s = models.FloatField(default=0.0)
    useful_gpu_s = models.FloatField(default=0.0)
    lost_gpu_s = models.FloatField(default=0.0)
    borrowed_gpu_s = models.FloatField(default=0.0)
    # Lost, split by why, as on ``UsageSample``.
    lost_restore_gpu_s = models.FloatField(default=0.0)
    lost_topology_gpu_s = models.FloatField(default=0.0)
    lost_evicted_gpu_s = models.FloatField(default=0.0)
    lost_failed_gpu_s = models.FloatField(default=0.0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["job", "day"], name="job_usage_job_day_unique")]
        indexes = [models.Index(fields=["day", "team"], name="job_usage_day_team_idx")]

    def __str__(self) -> str:
        return f"job {self.job_id} on {self.day}"


class FleetSample(models.Model):
    """One tick of the whole fleet: capacity, what it did, and the queue."""

    sim_time_s = models.FloatField()
    interval_s = models.FloatField()
    recorded_at = models.DateTimeField()
    capacity_gpus = models.PositiveIntegerField()
    healthy_gpus = models.PositiveIntegerField()
    serving_gpus = models.PositiveIntegerField()
    training_gpus = models.PositiveIntegerField()
    batch_gpus = models.PositiveIntegerField()
    idle_gpu_s = models.FloatField()
    down_gpu_s = models.FloatField()
    pending_jobs = models.PositiveIntegerField()
    running_jobs = models.PositiveIntegerField()

    class Meta:
        indexes = [
            models.Index(fields=["recorded_at"], name="fleet_sample_recorded_idx"),
            models.Index(fields=["sim_time_s"], name="fleet_sample_sim_time_idx"),
        ]

    def __str__(self) -> str:
        return f"fleet at {self.sim_time_s:.0f} s"

    @property
    def allocated_gpus(self) -> int:
        return self.serving_gpus + self.training_gpus + self.batch_gpus


class Incident(models.Model):
    """A node failure and its recovery, in fleet seconds: failed -> detected -> replaced (the gangs
    restart on healthy capacity) -> restored (checkpoint read) -> resumed (computing again)."""

    class Kind(models.TextChoices):
        DEAD = "dead", "Dead (heartbeats stopped)"
        DEGRADED = "degraded", "Degraded (GPU lost)"
        SLOW = "slow", "Slow (step time up)"

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="incidents")
    kind = models.CharField(max_length=10, choices=Kind.choices)
    gpus_lost = models.PositiveSmallIntegerField(default=0)
    slowdown = models.FloatField(default=1.0)
    failed_at = models.FloatField()
    detected_at = models.FloatField(null=True, blank=True)
    replaced_at = models.FloatField(null=True, blank=True)
    restored_at = models.FloatField(null=True, blank=True)
    resumed_at = models.FloatField(null=True, blank=True)
    jobs = models.ManyToManyField(Job, blank=True, related_name="incidents")
    lost_gpu_s = models.FloatField(default=0.0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-failed_at", "-id"]
        indexes = [models.Index(fields=["node", "detected_at"], name="incident_node_detected_idx")]

    def __str__(self) -> str:
        return f"{self.kind} on node {self.node_id} at {self.failed_at:.0f} s"

    @property
    def open(self) -> bool:
        return self.resumed_at is None


class ClusterAccount(models.Model):
    """The account on the cluster that a user's jobs run as on a real backend (``scheduling.backends``).
    Set by an admin (or ``FLEETLINE_CLUSTER_ACCOUNTS``); a user without one cannot submit commands.
    Never root, never the service's own account."""

    user = models.OneToOneField("auth.User", on_delete=models.CASCADE, related_name="cluster_account")
    username = models.CharField(
        max_length=32,
        validators=[
            RegexValidator(r"^[a-z_][a-z0-9_-]{0,31}$", "A POSIX user name: lower-case letters, digits, '_' and '-'.")
        ],
        help_text="The user name on the cluster that this user's jobs run as.",
    )

    class Meta:
        constraints = [
            models.CheckConstraint(condition=~models.Q(username="root"), name="cluster_account_not_root"),
        ]

    def __str__(self) -> str:
        return f"{self.user} as {self.username}"
