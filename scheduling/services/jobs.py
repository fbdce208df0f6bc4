"""Jobs from the outside: submit (validated against the bounds in ``scheduling.limits``, the
fleet and the team's limits; once per idempotency key) and cancel."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import Count, Max, OuterRef, Q, QuerySet, Subquery, Sum

from core.compiled_queries import CompiledInsert, CompiledQuery, attnames, instance_from
from scheduling.engine.capacity import Shape, domain_gpus
from scheduling.engine.model import LEVELS, Policy
from scheduling.engine.schedule import smallest_size
from scheduling.job_release import jobs_release
from scheduling.limits import (
    MAX_CHECKPOINT_GB,
    MAX_CHECKPOINT_INTERVAL_S,
    MAX_COMMAND_CHARS,
    MAX_DURATION_S,
    MAX_GANG_GPUS,
    MAX_TIME_LIMIT_S,
    MIN_CHECKPOINT_INTERVAL_S,
    range_problem,
)
from scheduling.models import AcceleratorType, ClusterAccount, FleetClock, Job, Level, Node, SchedulerEvent
from tenants.models import PriorityClass, Quota, Team


@dataclass(frozen=True, slots=True)
class JobSpec:
    name: str
    kind: str
    priority_class_id: int
    accelerator_type_id: int
    gpus: int
    duration_s: float
    time_limit_s: float | None = None
    min_gpus: int | None = None
    max_gpus: int | None = None
    checkpoint_interval_s: float | None = None
    checkpoint_gb: float = 0.0
    checkpoint_on_preempt: bool = False
    required_level: str = ""
    preferred_level: str = ""
    # What runs on a real backend (``settings.FLEETLINE_BACKEND``): a command line or a batch
    # script, run by bash on every node of the gang as the submitter's cluster account.
    command: str = ""


def fleet_clock_now() -> QuerySet[FleetClock, Any]:
    return FleetClock.objects.filter(pk=1).values("sim_now_s")


# Most pages ask it: its SQL is built once (`CompiledQuery`), not on each request.
FLEET_NOW = CompiledQuery(fleet_clock_now)


def fleet_now_s() -> float:
    row = FLEET_NOW.first()
    return row["sim_now_s"] if row else 0.0


@dataclass(frozen=True, slots=True)
class Submission:
    """What a submission with an idempotency key did: made ``job``, or found it made earlier."""

    job: Job
    created: bool


class NamesChanged(Exception):
    """The priority class or accelerator type a caller resolved from a name (by id) no longer has
    that name: renamed or removed since. Raised before anything is written."""


class IdempotencyKeyReused(Exception):
    """The key was used before by the same submitter for a different submission."""

    def __init__(self, job: Job) -> None:
        self.job = job
        super().__init__(f"This Idempotency-Key was used for a different submission (job {job.pk}).")


def _bound_errors(spec: JobSpec) -> dict[str, str]:
    """Every number within ``scheduling.limits``, checked in seconds (after any unit conversion)."""
    gang = {"minimum": 1, "maximum": MAX_GANG_GPUS}
    checks: tuple[tuple[str, str, float | None, dict[str, Any]], ...] = (
        ("gpus", "GPUs", spec.gpus, gang),
        ("min_gpus", "Minimum GPUs", spec.min_gpus, gang),
        ("max_gpus", "Maximum GPUs", spec.max_gpus, gang),
        ("duration", "Duration", spec.duration_s, {"positive": True, "maximum": MAX_DURATION_S, "unit": "s"}),
        ("time_limit", "Time limit", spec.time_limit_s, {"positive": True, "maximum": MAX_TIME_LIMIT_S, "unit": "s"}),
        (
            "checkpoint_interval",
            "Checkpoint interval",
            spec.checkpoint_interval_s,
            {"minimum": MIN_CHECKPOINT_INTERVAL_S, "maximum": MAX_CHECKPOINT_INTERVAL_S, "unit": "s"},
        ),
        (
            "checkpoint_gb",
            "Checkpoint size",
            spec.checkpoint_gb,
            {"minimum": 0, "maximum": MAX_CHECKPOINT_GB, "unit": "GB"},
        ),
    )
    errors: dict[str, str] = {}
    for key, label, value, bounds in checks:
        problem = None if value is None else range_problem(value, **bounds)
        if problem:
            errors[key] = f"{label} {problem}."
    return errors


# Engine knobs admins cannot set, as every cycle runs them (`scheduling.convert.ENGINE_ONLY_FIELDS`):
# the node size planning assumes (a larger gang takes whole nodes of it) and whether elastic jobs
# may start at their minimum size.
_ENGINE = Policy()


@dataclass(frozen=True, slots=True)
class _Lookups:
    """What checking and recording a submission reads, in two queries: the priority class, and the
    accelerator type with the fleet's nodes of it, the team's quota on it and the fleet clock."""

    priority: PriorityClass | None
    accelerator: AcceleratorType | None
    per_node_gpus: int | None  # the GPUs of its first node by name
    fleet_gpus: int
    # The engine's `Shape` of the accelerator's nodes, all of them healthy: what the fleet could
    # ever run, whatever is down today.
    healthy_shape: Shape
    quota_guaranteed: int | None
    quota_borrow_limit: int | None  # None: unlimited, or no quota
    now_s: float


def _most_in_one(nodes: QuerySet[Node], domain: str) -> Subquery:
    """The most of ``nodes`` that one ``domain`` (a rack, a pod) holds."""
    return Subquery(nodes.values(domain).annotate(value=Count("pk")).order_by("-value").values("value")[:1])


def accelerator_lookups(
    *, accelerator_type_id: int, team_id: int, topology: bool = False
) -> QuerySet[AcceleratorType, dict[str, Any]]:
    """The accelerator type, with the GPUs of its first node by name, the fleet's GPUs of it, the
    shape of its nodes (the largest node, the nodes that can be whole, and with ``topology`` how
    many of those the fullest rack and the fullest pod have), the team's quota on it and the
    fleet clock. The fleet-wide figures are aggregates over one join of its nodes."""
    nodes = Node.objects.filter(accelerator_type=OuterRef("pk")).order_by()
    whole_size = _ENGINE.gpus_per_node
    whole = nodes.filter(gpus__gte=whole_size)
    quota = Quota.objects.filter(team_id=team_id, accelerator_type=OuterRef("pk"))
    domains = {"rack_whole_nodes": _most_in_one(whole, "rack"), "pod_whole_nodes": _most_in_one(whole, "rack__pod")}
    return (
        AcceleratorType.objects.filter(pk=accelerator_type_id)
        .values(
            *attnames(AcceleratorType),
            per_node_gpus=Subquery(nodes.order_by("name").values("gpus")[:1]),
            fleet_gpus=Sum("nodes__gpus"),
            largest_node_gpus=Max("nodes__gpus"),
            whole_nodes=Count("nodes", filter=Q(nodes__gpus__gte=whole_size)),
            **(domains if topology else {}),
            quota_guaranteed=Subquery(quota.values("guaranteed")[:1]),
            quota_borrow_limit=Subquery(quota.values("borrow_limit")[:1]),
            now_s=Subquery(FleetClock.objects.filter(pk=1).values("sim_now_s")),
        )
        .order_by()[:1]
    )


def accelerator_lookups_with_topology(
    *, accelerator_type_id: int, team_id: int
) -> QuerySet[AcceleratorType, dict[str, Any]]:
    return accelerator_lookups(accelerator_type_id=accelerator_type_id, team_id=team_id, topology=True)


def priority_class_row(*, priority_class_id: int) -> QuerySet[PriorityClass, dict[str, Any]]:
    return PriorityClass.objects.filter(pk=priority_class_id).values(*attnames(PriorityClass))[:1]


# Every submission runs two of these: their SQL is built once (`CompiledQuery`), not on each
# submission. Counting the whole nodes per rack and per pod is most of the lookup's cost on a large
# fleet, so only a submission bound to a domain (`JobSpec.required_level`) reads those counts.
ACCELERATOR_LOOKUPS = CompiledQuery(accelerator_lookups, accelerator_type_id=int, team_id=int)
ACCELERATOR_LOOKUPS_WITH_TOPOLOGY = CompiledQuery(
    accelerator_lookups_with_topology, accelerator_type_id=int, team_id=int
)
PRIORITY_CLASS = CompiledQuery(priority_class_row, priority_class_id=int)
JOB_INSERT = CompiledInsert(Job)
EVENT_INSERT = CompiledInsert(SchedulerEvent)


def _lookups(spec: JobSpec, team: Team) -> _Lookups:
    bound = spec.required_level in ("node", "rack", "pod")
    lookups = ACCELERATOR_LOOKUPS_WITH_TOPOLOGY if bound else ACCELERATOR_LOOKUPS
    row = lookups.first(accelerator_type_id=spec.accelerator_type_id, team_id=team.pk) or {}
    whole = row.get("whole_nodes") or 0
    priority = PRIORITY_CLASS.first(priority_class_id=spec.priority_class_id)
    return _Lookups(
        priority=instance_from(PriorityClass, priority) if priority else None,
        accelerator=instance_from(AcceleratorType, row) if row else None,
        per_node_gpus=row.get("per_node_gpus"),
        fleet_gpus=row.get("fleet_gpus") or 0,
        healthy_shape=(
            _ENGINE.gpus_per_node,
            row.get("largest_node_gpus") or 0,
            whole,
            # Read only for a required level: without one, only the fleet-wide figures matter.
            row.get("rack_whole_nodes", whole) or 0,
            row.get("pod_whole_nodes", whole) or 0,
        ),
        quota_guaranteed=row.get("quota_guaranteed"),
        quota_borrow_limit=row.get("quota_borrow_limit"),
        now_s=row.get("now_s") or 0.0,
    )


def _spec_errors(spec: JobSpec, team: Team, looked_up: _Lookups) -> dict[str, str]:
    errors = _bound_errors(spec)
    accelerator, priority = looked_up.accelerator, looked_up.priority
    if accelerator is None:
        errors["accelerator_type"] = "Unknown accelerator type."
    if priority is None:
        errors["priority_class"] = "Unknown priority class."
    elif priority.kind != spec.kind:
        errors["priority_class"] = f"Priority class {priority.name} is for {priority.kind} jobs, not {spec.kind}."
    if not spec.name.strip():
        errors["name"] = "Give the job a name."
    if spec.min_gpus is not None and "min_gpus" not in errors and not 1 <= spec.min_gpus <= spec.gpus:
        errors["min_gpus"] = "Minimum GPUs must be between 1 and the gang size."
    if spec.max_gpus is not None and "max_gpus" not in errors and spec.max_gpus < spec.gpus:
        errors["max_gpus"] = "Maximum GPUs cannot be below the gang size."
    for name in ("required_level", "preferred_level"):
        if getattr(spec, name) not in ("", *Level.values):
            errors[name] = f"Level must be one of {', '.join(Level.values)}."
    if accelerator is not None and "gpus" not in errors:
        errors.update(_capacity_errors(spec, team, accelerator, looked_up))
    return errors


def _capacity_errors(spec: JobSpec, team: Team, accelerator: AcceleratorType, looked_up: _Lookups) -> dict[str, str]:
    per_node, total = looked_up.per_node_gpus, looked_up.fleet_gpus
    if not per_node:
        return {"accelerator_type": f"The fleet has no {accelerator.name} nodes."}
    if spec.gpus > per_node and spec.gpus % per_node:
        return {"gpus": f"Multi-node gangs take whole nodes: ask for a multiple of {per_node} GPUs."}
    # An elastic job can start at its minimum size, so that is the size that must fit.
    size = smallest_size(spec.gpus, spec.min_gpus, _ENGINE.elastic)
    if size > total:
        return {"gpus": f"The fleet has only {total} {accelerator.name} GPUs."}
    level = spec.required_level if spec.required_level in LEVELS else "fleet"  # none, or refused above
    if size > domain_gpus(looked_up.healthy_shape, level):
        return {"gpus": _what_fits(accelerator.name, looked_up.healthy_shape, level, size < spec.gpus)}
    guaranteed, borrow_limit = looked_up.quota_guaranteed, looked_up.quota_borrow_limit
    if guaranteed is not None and borrow_limit is not None and spec.gpus > guaranteed + borrow_limit:
        limit = guaranteed + borrow_limit
        return {"gpus": f"{team.name} may use at most {limit} {accelerator.name} GPUs (guarantee plus borrowing)."}
    return {}


_WITHIN = {"node": "within one node", "rack": "within one rack", "pod": "within one pod", "fleet": "in all"}


def _what_fits(accelerator: str, shape: Shape, level: str, elastic: bool) -> str:
    """The largest gang a healthy fleet of ``shape`` holds within one domain of ``level``, then
    within each wider level until one holds as much as the whole fleet, in words."""
    anywhere = domain_gpus(shape, "fleet")
    if level == "fleet":
        words = (
            f"On {accelerator} a gang can have at most {anywhere} GPUs"
            f" (one larger than a node takes whole nodes of {shape[0]} GPUs)."
        )
    else:
        bounds: list[tuple[str, int]] = []
        for wider in LEVELS[LEVELS.index(level) :]:
            bounds.append((wider, domain_gpus(shape, wider)))
            if bounds[-1][1] >= anywhere:
                break
        (_, most), *wider_bounds = bounds
        words = f"On {accelerator} a gang that must fit {_WITHIN[level]} can have at most {most} GPUs"
        words += "".join(f"; {_WITHIN[wider]} at most {gpus}" for wider, gpus in wider_bounds) + "."
    return f"{words} An elastic job must fit at its minimum size." if elastic else words


@transaction.atomic
def job_spec_errors(*, team: Team, spec: JobSpec) -> dict[str, str]:
    """What `job_submit` would refuse in ``spec`` for ``team``, by field; writes nothing."""
    return _spec_errors(spec, team, _lookups(spec, team))


def job_submit(*, team: Team, spec: JobSpec, user: User | None, names: tuple[str, str] | None = None) -> Job:
    """Validate ``spec`` for ``team`` and queue it. Raises ValidationError keyed by field.

    ``names``: the (priority class, accelerator type) names the caller resolved ``spec``'s ids
    from, say from a cache; if either row no longer has its name, NamesChanged is raised.

    Nothing is written unless every check passes; the job and its event commit together."""
    return _job_insert(team=team, spec=spec, user=user, names=names)


def cluster_account_of(user: User | None) -> str:
    """The cluster account ``user``'s jobs run as: the one an admin set, else the one
    ``FLEETLINE_CLUSTER_ACCOUNTS`` names; empty when neither does."""
    if user is None:
        return ""
    account = ClusterAccount.objects.filter(user_id=user.pk).values_list("username", flat=True).first()
    return account or settings.FLEETLINE_CLUSTER_ACCOUNTS.get(user.get_username(), "")


def _command_errors(spec: JobSpec, account: str) -> dict[str, str]:
    """On a real backend a job is a command run as its submitter's own cluster account, with a
    time limit the cluster enforces; on the modelled fleet nothing runs, so no command is taken."""
    if settings.FLEETLINE_BACKEND == "modelled":
        if spec.command:
            return {"command": "This fleet is modelled: jobs run no command here."}
        return {}
    errors = {}
    if not spec.command.strip():
        errors["command"] = "Give the command (or batch script) the job runs."
    elif len(spec.command) > MAX_COMMAND_CHARS:
        errors["command"] = f"The command is longer than {MAX_COMMAND_CHARS:,} characters."
    elif "\x00" in spec.command:
        errors["command"] = "The command contains a NUL character."
    if not account:
        errors["command"] = (
            "You have no account on the cluster, so your jobs cannot run: ask an admin to map one to your user."
        )
    elif account == "root":
        errors["command"] = "Jobs never run as root: ask an admin to map your own cluster account."
    if spec.time_limit_s is None:
        errors["time_limit"] = "Give a time limit: the cluster ends the job at it."
    return errors


def _job_insert(
    *,
    team: Team,
    spec: JobSpec,
    user: User | None,
    idempotency_key: str = "",
    idempotency_digest: str = "",
    names: tuple[str, str] | None = None,
) -> Job:
    looked_up = _lookups(spec, team)
    if names is not None and names != (
        getattr(looked_up.priority, "name", None),
        getattr(looked_up.accelerator, "name", None),
    ):
        raise NamesChanged()
    account = cluster_account_of(user) if settings.FLEETLINE_BACKEND != "modelled" else ""
    errors = {**_spec_errors(spec, team, looked_up), **_command_errors(spec, account)}
    priority, accelerator = looked_up.priority, looked_up.accelerator
    if errors or priority is None or accelerator is None:  # either missing is among the errors
        raise ValidationError(errors)
    now = looked_up.now_s
    job = JOB_INSERT.create(
        team=team,
        submitted_by=user,
        name=spec.name.strip(),
        kind=spec.kind,
        # The rows just read, so that the event and the API's answer name them without a query.
        priority_class=priority,
        accelerator_type=accelerator,
        gpus=spec.gpus,
        min_gpus=spec.min_gpus,
        max_gpus=spec.max_gpus,
        duration_s=spec.duration_s,
        time_limit_s=spec.time_limit_s,
        checkpoint_interval_s=spec.checkpoint_interval_s,
        checkpoint_gb=spec.checkpoint_gb,
        checkpoint_on_preempt=spec.checkpoint_on_preempt,
        required_level=spec.required_level,
        preferred_level=spec.preferred_level,
        command=spec.command,
        cluster_account=account,
        submit_s=now,
        idempotency_key=idempotency_key,
        idempotency_digest=idempotency_digest,
    )
    EVENT_INSERT.create(
        job=job,
        team=team,
        kind=SchedulerEvent.Kind.SUBMITTED,
        sim_time_s=now,
        message=f"Submitted: {job.gpus} {job.accelerator_type.name} GPUs",
    )
    return job


def submission_digest(*, team: Team, spec: JobSpec) -> str:
    """A digest of what was asked for: the same submission sent again has the same digest."""
    canonical = {**asdict(spec), "name": spec.name.strip(), "team": team.pk}
    return hashlib.sha256(json.dumps(canonical, sort_keys=True).encode()).hexdigest()


def _earlier_submission(*, user: User, idempotency_key: str, digest: str) -> Submission | None:
    job = Job.objects.filter(submitted_by_id=user.pk, idempotency_key=idempotency_key).first()
    if job is None:
        return None
    if job.idempotency_digest != digest:
        raise IdempotencyKeyReused(job)
    return Submission(job=job, created=False)


def job_submit_idempotent(
    *, team: Team, spec: JobSpec, user: User, idempotency_key: str, names: tuple[str, str] | None = None
) -> Submission:
    """Submit once per ``idempotency_key`` and submitter, as payment APIs do: a retry of the same
    submission (after a timeout or an error response) gets the job the first attempt made. An
    empty key submits without that promise.

    Raises IdempotencyKeyReused when the key was used for a different submission, and
    ValidationError and NamesChanged as ``job_submit`` does. Two attempts racing with one key make one job: the
    database's unique constraint refuses the second insert, which then finds the first."""
    if not idempotency_key:
        return Submission(job=job_submit(team=team, spec=spec, user=user, names=names), created=True)
    digest = submission_digest(team=team, spec=spec)
    try:
        with transaction.atomic():
            job = _job_insert(
                team=team,
                spec=spec,
                user=user,
                idempotency_key=idempotency_key,
                idempotency_digest=digest,
                names=names,
            )
    except (IntegrityError, ValidationError):
        # Most keys are new, so the key is looked up only when the insert fails: refused by the
        # unique constraint (the key was used), or by a check that the first attempt passed (a
        # retry gets the first attempt's job even if, say, the quota shrank meanwhile).
        earlier = _earlier_submission(user=user, idempotency_key=idempotency_key, digest=digest)
        if earlier is None:
            raise
        return earlier
    return Submission(job=job, created=True)


def job_cancel(*, job: Job, user: User) -> bool:
    """Cancel a job on a user's request; False when it had already ended."""
    name = user.get_username()
    return bool(jobs_release(job_ids=[job.pk], sim_now_s=fleet_now_s(), reason=f"Cancelled by {name}"))
