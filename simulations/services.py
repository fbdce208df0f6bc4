"""Starting, running and cancelling what-if replays.

``simulation_start`` checks everything a replay needs before anything is written (who asks, the
trace with the importer's line-numbered errors, the bounds, the policy settings, the fleet shape
and its quotas), stores the request and queues the replay after commit. ``simulation_run`` (the
``simulations`` queue's task) claims it with a guarded update, replays the trace under the chosen
policy and under the fleet's current one, and stores the simulator's metrics and HTML report
(which loads plotly.js from the site). Progress, cancelling and the wall-time bound go through the
simulator's progress callback, so a replay stops between two of its cycles, never half-way through
writing its result.
"""

from __future__ import annotations

import json
import logging
import math
import time
import zlib
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import Q
from django.templatetags.static import static
from django.utils import timezone

from core.tasks import enqueue_on_commit
from scheduling.sim.fleet import Fleet, QuotaSpec, SpecError
from scheduling.sim.runner import check_quotas, compare_policies
from scheduling.sim.simulator import SimulationStalled
from scheduling.sim.trace import TraceJob
from simulations.inputs import (
    candidate_preset,
    current_preset,
    fleet_spec_check,
    fleet_spec_current,
    history_trace,
    jobs_check,
    policy_settings_clean,
    preset_check,
    quotas_current,
    trace_decode,
    trace_parse,
)
from simulations.models import Simulation
from tenants.models import Team
from tenants.permissions import AnyUser, can_manage_team_quota, is_fleet_admin

logger = logging.getLogger("fleetline.simulations")

CANDIDATE, CURRENT = "candidate", "current"
PROGRESS_EVERY_S = 1.0
PLOTLY_JS = "vendor/plotly/plotly.min.js"
UNEXPECTED = "The replay failed unexpectedly; the worker's log says why."


@dataclass(frozen=True, slots=True)
class SimulationRequest:
    """What a user asks for. ``trace_data`` (the uploaded file's bytes) for a trace replay,
    ``history_days`` for the fleet's own jobs. ``fleet_spec`` empty: the live fleet's shape."""

    source: str
    preset: str
    team: Team | None = None
    trace_name: str = ""
    trace_data: bytes | None = None
    trace_format: str = "canonical"
    history_days: float | None = None
    policy_settings: Mapping[str, Any] | None = None
    fleet_spec: str = ""
    seed: int = 0


def can_start_simulation(*, user: AnyUser, team: Team | None) -> bool:
    """Fleet admins replay anything; a team's leads replay their own team's work."""
    if is_fleet_admin(user):
        return True
    return team is not None and can_manage_team_quota(user, team)


def _quotas_for(fleet: Fleet, team: Team | None) -> QuotaSpec:
    spec = quotas_current(team=team)
    kept = tuple(q for q in spec.quotas if q.accelerator in fleet.accelerators)
    quotas = QuotaSpec(kept, spec.departments)
    try:
        check_quotas(fleet, quotas)
    except SpecError as error:
        raise ValidationError({"fleet_spec": f"Too small for the teams' guarantees: {error}."}) from None
    return quotas


def _trace_for(request: SimulationRequest) -> tuple[list[TraceJob], str]:
    """The trace and the text to keep for the replay (an uploaded file's; none for history)."""
    if request.source == Simulation.Source.TRACE:
        if request.trace_data is None:
            raise ValidationError({"trace": "Choose a trace file to replay."})
        text = trace_decode(data=request.trace_data)
        trace = trace_parse(name=request.trace_name, text=text, fmt=request.trace_format)
        jobs_check(count=len(trace), field="trace")
        return trace, text
    if request.source == Simulation.Source.HISTORY:
        if request.history_days is None:
            raise ValidationError({"history_days": "Say how many days of the fleet's jobs to replay."})
        trace = history_trace(days=request.history_days, team=request.team)
        jobs_check(count=len(trace), field="history_days")
        # Frozen as the request saw it: the replay, and any rerun of it, uses these very jobs.
        return trace, json.dumps([asdict(job) for job in trace], separators=(",", ":"))
    raise ValidationError({"source": f"Unknown source {request.source!r}: expected trace or history."})


def simulation_start(*, user: AnyUser, request: SimulationRequest) -> Simulation:
    if not can_start_simulation(user=user, team=request.team):
        raise PermissionDenied("Only fleet admins, and a team's leads for their own team, start replays.")
    preset_check(preset=request.preset)
    policy_settings = policy_settings_clean(raw=request.policy_settings or {})
    trace, text = _trace_for(request)
    fleet_spec = request.fleet_spec.strip() or fleet_spec_current()
    _quotas_for(fleet_spec_check(spec=fleet_spec), request.team)
    with transaction.atomic():
        simulation = Simulation.objects.create(
            created_by=user if isinstance(user, User) else None,
            team=request.team,
            source=request.source,
            trace_name=request.trace_name[:200] if request.source == Simulation.Source.TRACE else "",
            trace_format=request.trace_format if request.source == Simulation.Source.TRACE else "",
            trace_text=text,
            history_days=request.history_days if request.source == Simulation.Source.HISTORY else None,
            jobs=len(trace),
            preset=request.preset,
            policy_settings=policy_settings,
            fleet_spec=fleet_spec,
            seed=request.seed,
        )
        enqueue_on_commit("simulations.tasks.simulation_run_task", robust=False, simulation_id=simulation.pk)
    return simulation


def _abandoned_before() -> datetime:
    """A replay still running after its wall-time bound and a margin lost its worker (killed, or
    stopped by the task's hard time limit) and will not report again."""
    return timezone.now() - timedelta(seconds=settings.SIMULATION_MAX_WALL_S + 120)


def simulation_cancel(*, simulation: Simulation) -> Simulation:
    """A queued replay, or one whose worker is gone, is cancelled at once; a running one stops at
    its next progress report."""
    now = timezone.now()
    stopped = Simulation.objects.filter(
        Q(state=Simulation.State.QUEUED) | Q(state=Simulation.State.RUNNING, started_at__lt=_abandoned_before()),
        pk=simulation.pk,
    ).update(state=Simulation.State.CANCELLED, cancel_requested=True, finished_at=now)
    if not stopped:
        Simulation.objects.filter(pk=simulation.pk, state=Simulation.State.RUNNING).update(cancel_requested=True)
    simulation.refresh_from_db()
    return simulation


# Running ------------------------------------------------------------------------------------------


class ReplayStopped(Exception):
    """Raised from the progress callback to stop a replay between two cycles."""

    def __init__(self, state: str, message: str) -> None:
        super().__init__(message)
        self.state = state


class _Progress:
    """The simulator's progress callback for both policies in turn: writes the overall fraction
    at most once a second, and stops the replay when it was cancelled or ran out of wall time."""

    def __init__(self, simulation_id: int, policies: int) -> None:
        self.simulation_id = simulation_id
        self.policies = policies
        self.index = -1
        self.deadline = time.monotonic() + settings.SIMULATION_MAX_WALL_S
        self.written_at = 0.0

    def for_policy(self, name: str) -> Callable[[float], None]:
        self.index += 1
        self.report(0.0, force=True)
        return self.report

    def report(self, fraction: float, *, force: bool = False) -> None:
        now = time.monotonic()
        if now > self.deadline:
            raise ReplayStopped(
                Simulation.State.FAILED,
                f"Stopped after {settings.SIMULATION_MAX_WALL_S:g} s of wall time, the bound for one replay: "
                "replay fewer jobs or a shorter period.",
            )
        if not force and now - self.written_at < PROGRESS_EVERY_S:
            return
        self.written_at = now
        overall = min(1.0, max(0.0, (self.index + fraction) / self.policies))
        updated = Simulation.objects.filter(
            pk=self.simulation_id, state=Simulation.State.RUNNING, cancel_requested=False
        ).update(progress=overall)
        if not updated:
            raise ReplayStopped(Simulation.State.CANCELLED, "Cancelled.")


def _claim(simulation_id: int) -> bool:
    """Queued -> running, once. A replay still marked running long after its wall-time bound lost
    its worker (the task is delivered again after a worker dies): it is claimed again."""
    return bool(
        Simulation.objects.filter(pk=simulation_id, cancel_requested=False)
        .filter(
            Q(state=Simulation.State.QUEUED) | Q(state=Simulation.State.RUNNING, started_at__lt=_abandoned_before())
        )
        .update(state=Simulation.State.RUNNING, started_at=timezone.now(), progress=0.0)
    )


def _finish(simulation_id: int, state: str, **fields: Any) -> None:
    Simulation.objects.filter(pk=simulation_id, state=Simulation.State.RUNNING).update(
        state=state, finished_at=timezone.now(), **fields
    )


def _trace_of(simulation: Simulation) -> list[TraceJob]:
    if simulation.source == Simulation.Source.TRACE:
        return trace_parse(name=simulation.trace_name, text=simulation.trace_text, fmt=simulation.trace_format)
    return [TraceJob(**job) for job in json.loads(simulation.trace_text)]


def live_tick_s() -> float:
    """The fleet time one live cycle covers: replays plan on the same ticks as the live fleet."""
    return settings.FLEET_CYCLE_INTERVAL_S * settings.FLEET_CLOCK_SPEED


def simulation_run(*, simulation_id: int) -> str | None:
    """Run one queued replay to its end; returns its final state (None: not this worker's)."""
    if not _claim(simulation_id):
        return None
    simulation = Simulation.objects.get(pk=simulation_id)
    progress = _Progress(simulation_id, policies=2)
    try:
        fleet = fleet_spec_check(spec=simulation.fleet_spec)
        comparison = compare_policies(
            _trace_of(simulation),
            fleet,
            [CANDIDATE, CURRENT],
            quotas=_quotas_for(fleet, simulation.team),
            seed=simulation.seed,
            tick_s=live_tick_s(),
            progress=progress.for_policy,
            variants={
                CANDIDATE: candidate_preset(preset=simulation.preset, policy_settings=simulation.policy_settings),
                CURRENT: current_preset(),
            },
        )
    except ReplayStopped as stop:
        _finish(simulation_id, stop.state, error="" if stop.state == Simulation.State.CANCELLED else str(stop))
        return stop.state
    except (ValidationError, SimulationStalled, ValueError) as error:
        message = "; ".join(error.messages) if isinstance(error, ValidationError) else str(error)
        _finish(simulation_id, Simulation.State.FAILED, error=message[:2000])
        return Simulation.State.FAILED
    except Exception:
        _finish(
            simulation_id, Simulation.State.FAILED, error="The replay failed unexpectedly; the worker's log has why."
        )
        raise
    from scheduling.sim.report import build_html

    candidate, current = (result.metrics for result in comparison.results)
    # plotly.js (4.8 MB) comes from this site, as on every page with a chart: the browser keeps it.
    html = build_html(comparison, plotly_js_url=static(PLOTLY_JS))
    report = zlib.compress(html.encode("utf-8"), 6)
    _finish(
        simulation_id,
        Simulation.State.SUCCEEDED,
        progress=1.0,
        results=_finite({"meta": comparison.meta, CANDIDATE: candidate, CURRENT: current}),
        report_html_z=report,
    )
    logger.info("simulation %d done: %d jobs in %.1f s", simulation_id, simulation.jobs, candidate.get("sim_wall_s", 0))
    return Simulation.State.SUCCEEDED


def _finite(value: Any) -> Any:
    """JSON as the database stores it: NaN and infinities (a metric with nothing to measure)
    become null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(item) for item in value]
    return value


def simulation_report_html(*, simulation: Simulation) -> str | None:
    if simulation.report_html_z is None:
        return None
    return zlib.decompress(bytes(simulation.report_html_z)).decode("utf-8")
