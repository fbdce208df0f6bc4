"""What a replay runs on, from the request or the database: the trace, the fleet's shape, the
quotas, the policies (the chosen one and the fleet's current one), each checked against bounds.

Every check raises Django's ``ValidationError`` keyed by the input's field, so the page and the
API show the same messages beside the same fields.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError

from scheduling import engine
from scheduling.convert import UNLIMITED, policy_from_row
from scheduling.engine import policy_settings
from scheduling.engine.knobs import Knob
from scheduling.engine.policy_settings import policy_with
from scheduling.models import AcceleratorType, Job, Node
from scheduling.services.jobs import fleet_now_s
from scheduling.sim.fleet import DEFAULT_ACCELERATOR, Fleet, NodeGroup, QuotaSpec, SpecError, parse_fleet
from scheduling.sim.runner import PRESETS, Preset
from scheduling.sim.trace import FORMATS, TraceError, TraceJob, load_trace
from tenants.models import FleetPolicy, Quota, Team

# The shorthand only: parse_fleet also reads JSON files by path, which a web user must not name.
FLEET_SHORTHAND = re.compile(r"^\d+x\d+x\d+x\d+(?::[A-Za-z0-9_.-]+)?$")
MAX_GPUS_PER_NODE = 64
TRACE_ERRORS_SHOWN = 20
DAY_S = 86400.0


# The settings a replay may change, by their engine name, as declared on the engine's `Policy`
# (`scheduling.engine.policy_settings.REPLAY`): type, bounds, choices, whether empty is a value.
POLICY_SETTINGS: dict[str, Knob] = policy_settings.REPLAY


def _setting_value(name: str, knob: Knob, value: Any) -> Any:
    if value is None:
        if knob.nullable:
            return None
        raise ValidationError({name: "Must have a value."})
    if knob.kind is bool:
        if not isinstance(value, bool):
            raise ValidationError({name: "Must be true or false."})
        return value
    if knob.kind is str:
        if knob.problem(value) is not None:
            raise ValidationError({name: f"Must be one of {', '.join(choice for choice, _ in knob.choices)}."})
        return value
    problem = knob.problem(value)
    if problem in ("is not a number", "is not finite"):
        raise ValidationError({name: "Must be a finite number."})
    if problem == "is not a whole number":
        raise ValidationError({name: "Must be a whole number."})
    if problem is not None:
        raise ValidationError({name: f"Must be between {knob.minimum:g} and {knob.maximum:g}."})
    return knob.kind(value)


def policy_settings_clean(*, raw: Mapping[str, Any]) -> dict[str, Any]:
    """The overrides a replay may apply to its preset, each checked; unknown names are refused."""
    unknown = sorted(set(raw) - set(POLICY_SETTINGS))
    if unknown:
        raise ValidationError(
            {"policy_settings": f"Unknown setting {unknown[0]!r}: expected some of {', '.join(POLICY_SETTINGS)}."}
        )
    return {name: _setting_value(name, POLICY_SETTINGS[name], value) for name, value in sorted(raw.items())}


def preset_check(*, preset: str) -> None:
    if preset not in PRESETS:
        raise ValidationError({"preset": f"Unknown policy {preset!r}: expected one of {', '.join(PRESETS)}."})


def candidate_preset(*, preset: str, policy_settings: Mapping[str, Any]) -> Preset:
    base = PRESETS[preset]
    policy = policy_with(base.policy(), policy_settings)
    return Preset(lambda: policy, quotas=base.quotas, oracle=base.oracle)


def current_preset() -> Preset:
    """The policy the fleet runs now, as the admin set it."""
    policy = policy_from_row(FleetPolicy.objects.order_by("pk").first())
    return Preset(lambda: policy)


# Traces -------------------------------------------------------------------------------------------


def _upload_name(name: str) -> str:
    base = Path(name or "trace.csv").name
    return re.sub(r"[^A-Za-z0-9_.-]", "_", base)[:100] or "trace.csv"


def trace_parse(*, name: str, text: str, fmt: str) -> list[TraceJob]:
    """The simulator's importer on an uploaded file's text; its line-numbered errors (up to
    ``TRACE_ERRORS_SHOWN``) become the ``trace`` field's messages, naming the file as uploaded."""
    if fmt not in FORMATS:
        raise ValidationError({"trace_format": f"Unknown format {fmt!r}: expected one of {', '.join(FORMATS)}."})
    shown = _upload_name(name)
    with tempfile.TemporaryDirectory(prefix="fleetline-trace-") as directory:
        path = Path(directory) / shown
        path.write_text(text, encoding="utf-8")
        try:
            return load_trace([path], fmt, max_errors=TRACE_ERRORS_SHOWN)
        except TraceError as error:
            raise ValidationError({"trace": [str(each).replace(str(path), shown) for each in error.errors]}) from None


def upload_size_check(*, content_length: str | None) -> None:
    """Refuse a request whose body is larger than a trace may be before it is read (Django would
    first write an uploaded file of any size to disk). The margin is for the form's other fields."""
    try:
        length = int(content_length or 0)
    except ValueError:
        return
    limit = settings.SIMULATION_MAX_TRACE_BYTES
    if length > limit + 64 * 1024:
        raise ValidationError({"trace": f"The upload has {length:,} bytes; a trace may have at most {limit:,}."})


def trace_decode(*, data: bytes) -> str:
    limit = settings.SIMULATION_MAX_TRACE_BYTES
    if len(data) > limit:
        raise ValidationError({"trace": f"The file has {len(data):,} bytes; a replay takes at most {limit:,}."})
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise ValidationError({"trace": f"The file is not UTF-8 text (byte {error.start + 1})."}) from None


def jobs_check(*, count: int, field: str) -> None:
    limit = settings.SIMULATION_MAX_JOBS
    if count == 0:
        raise ValidationError({field: "There is no job to replay."})
    if count > limit:
        raise ValidationError({field: f"{count:,} jobs; a replay takes at most {limit:,}."})


def _replayed_duration_s(duration_s: float, submit_s: float, now_s: float, *, serving: bool) -> float:
    """A serving deployment's replica runs until the deployment scales it down, recorded as a
    year of work: replayed, it serves until the end of the period, not for a year after it."""
    if not serving:
        return duration_s
    return min(duration_s, max(60.0, now_s - submit_s))


def history_trace(*, days: float, team: Team | None) -> list[TraceJob]:
    """The jobs submitted in the last ``days`` fleet days (one team's, or the whole fleet's), as a
    trace starting at the first of them. Each keeps its size, work, time limit, checkpoints,
    kind, priority and accelerator; the replay decides everything else again."""
    if not (0 < days <= settings.SIMULATION_MAX_HISTORY_DAYS):
        raise ValidationError(
            {"history_days": f"Must be more than 0 and at most {settings.SIMULATION_MAX_HISTORY_DAYS:g} days."}
        )
    now_s = fleet_now_s()
    since_s = now_s - days * DAY_S
    jobs = Job.objects.filter(submit_s__gte=since_s).order_by("submit_s", "id")
    if team is not None:
        jobs = jobs.filter(team=team)
    query = jobs.values_list(
        "id",
        "submit_s",
        "duration_s",
        "gpus",
        "team__slug",
        "kind",
        "priority_class__value",
        "time_limit_s",
        "min_gpus",
        "max_gpus",
        "checkpoint_interval_s",
        "checkpoint_gb",
        "accelerator_type__name",
        "deployment_id",
        named=True,
    )[: settings.SIMULATION_MAX_JOBS + 1]
    rows: list[Any] = list(query)
    start_s = rows[0].submit_s if rows else 0.0
    return [
        TraceJob(
            job_id=str(row.id),
            submit_s=row.submit_s - start_s,
            duration_s=_replayed_duration_s(row.duration_s, row.submit_s, now_s, serving=row.deployment_id is not None),
            gpus=row.gpus,
            team=row.team__slug,
            kind=row.kind,
            priority=row.priority_class__value,
            time_limit_s=row.time_limit_s,
            min_gpus=row.min_gpus,
            max_gpus=row.max_gpus,
            checkpoint_interval_s=row.checkpoint_interval_s,
            checkpoint_gb=row.checkpoint_gb,
            accelerator=row.accelerator_type__name,
        )
        for row in rows
    ]


# Fleet and quotas ---------------------------------------------------------------------------------


def fleet_spec_check(*, spec: str) -> Fleet:
    groups = [group.strip() for group in spec.split("+")]
    if not all(FLEET_SHORTHAND.match(group) for group in groups):
        raise ValidationError({"fleet_spec": "Expected PODSxRACKSxNODESxGPUS[:accelerator], e.g. 1x4x8x8:H100."})
    try:
        fleet = Fleet(tuple(g for group in groups for g in parse_fleet(group).groups))
    except SpecError as error:
        raise ValidationError({"fleet_spec": str(error)}) from None
    _fleet_accelerators_check(fleet=fleet)
    nodes = sum(g.pods * g.racks * g.nodes for g in fleet.groups)
    if nodes > settings.SIMULATION_MAX_NODES or any(g.gpus > MAX_GPUS_PER_NODE for g in fleet.groups):
        raise ValidationError(
            {
                "fleet_spec": f"At most {settings.SIMULATION_MAX_NODES:,} nodes of at most "
                f"{MAX_GPUS_PER_NODE} GPUs each; this is {nodes:,} nodes."
            }
        )
    return fleet


def _fleet_accelerators_check(*, fleet: Fleet) -> None:
    """A group that names its accelerator names one the fleet knows (an accelerator type): the
    jobs replayed ask for those, so a group of another kind would only stand idle. A group that
    names none is of the simulator's generic kind."""
    named = set(fleet.accelerators) - {DEFAULT_ACCELERATOR}
    unknown = sorted(named - set(AcceleratorType.objects.filter(name__in=named).values_list("name", flat=True)))
    if unknown:
        known = ", ".join(AcceleratorType.objects.order_by("name").values_list("name", flat=True)) or "none yet"
        raise ValidationError({"fleet_spec": f"No accelerator type named {unknown[0]!r}: the fleet knows {known}."})


def fleet_spec_current() -> str:
    """The live fleet's shape as the simulator's spec, per accelerator type: its pods, the most
    racks in a pod and the most nodes in a rack (the simulator's fleets are regular grids, so an
    uneven fleet is rounded up to the grid that holds it)."""
    shapes: dict[str, dict[str, Any]] = {}
    for accelerator, pod_id, rack_id, gpus in Node.objects.values_list(
        "accelerator_type__name", "rack__pod_id", "rack_id", "gpus"
    ):
        shape = shapes.setdefault(accelerator, {"pods": {}, "gpus": 0})
        racks = shape["pods"].setdefault(pod_id, {})
        racks[rack_id] = racks.get(rack_id, 0) + 1
        shape["gpus"] = max(shape["gpus"], gpus)
    groups = []
    for accelerator, shape in sorted(shapes.items()):
        pods = shape["pods"]
        racks = max(len(r) for r in pods.values())
        nodes = max(n for r in pods.values() for n in r.values())
        groups.append(NodeGroup(len(pods), racks, nodes, shape["gpus"], accelerator))
    if not groups:
        raise ValidationError({"fleet_spec": "The fleet has no nodes yet: give the fleet's shape."})
    return Fleet(tuple(groups)).describe()


def quotas_current(*, team: Team | None) -> QuotaSpec:
    """The teams' quotas as the simulator takes them (teams by slug); one team's only for a team's
    replay."""
    rows = Quota.objects.select_related("team__department", "accelerator_type")
    if team is not None:
        rows = rows.filter(team=team)
    quotas = []
    departments = {}
    for quota in rows:
        quotas.append(
            engine.Quota(
                team=quota.team.slug,
                accelerator=quota.accelerator_type.name,
                guaranteed=quota.guaranteed,
                borrow_limit=UNLIMITED if quota.borrow_limit is None else quota.borrow_limit,
                lend_limit=quota.lend_limit,
            )
        )
        departments[quota.team.slug] = quota.team.department.name
    return QuotaSpec(tuple(quotas), tuple(sorted(departments.items())))
