"""The discrete-event loop: arrivals, engine cycles, completions and hook actions over one FleetState.

Time jumps from one event to the next: the next arrival, the next FleetState event (completion,
time limit, end of a preemption grace, checkpoint), the next hook action, or the next periodic
re-plan. A scheduling cycle (snapshot -> `schedule` -> `apply`) runs when something changed: at
that instant, or with `tick_s` as the live cycle plans, on ticks (every `tick_s` from the first
submission: `FLEET_CYCLE_INTERVAL_S` x `FLEET_CLOCK_SPEED` of fleet time in the live fleet), so
that what happens between two ticks is planned together at the next one.

Two shortcuts keep long traces fast without changing any decision:
- A cycle is skipped when the gate (`gate.CycleGate`) shows that its plan could start, preempt,
  shrink and grow nothing (no free room in the right shape for any pending job, no reclaim of a
  guarantee or by priority possible, no elastic job that could grow). Under strict FIFO it looks
  only at the head of each queue. Not used with hooks (they change nodes behind its back).
- Periodic re-plans (`cycle_interval_s`) only run for policies whose decisions depend on time
  (fair share decay, preemption, elastic growth) and back off (x2, up to x16) while they change
  nothing; any real change resets them.

Cycles run without explanations (`schedule(..., explain=False)`), except when a job is waiting for
its first estimate: a cycle at an arrival asks for that job's (and the queue's ahead of it, which
its estimate follows), so every job's first estimated start is the one the live cycle would have
shown it when it was submitted (`metrics`: estimate errors).

A replay always ends: when simulated time stops advancing while cycles keep acting, or the same
job keeps being started or resized with no job completing in between, it stops with
`SimulationStalled`, naming the jobs involved.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any, TypedDict, Unpack

from scheduling.engine import (
    Completed,
    Event,
    Evicted,
    FleetState,
    Job,
    Kept,
    Node,
    Plan,
    Policy,
    Preempt,
    Quota,
    Reserve,
    Resized,
    Snapshot,
    Started,
    Team,
    TimedOut,
    schedule,
    schedule_reference,
)
from scheduling.engine.reference import FAST_PATH_QUIRKS

from .estimate_coverage import ShownEstimate
from .gate import CycleGate
from .hooks import Hook, Observer, SimContext
from .metrics import RunTotals, TeamShare, build_metrics, shown_estimates, team_shares
from .recorder import Recorder, Series

MAX_BACKOFF_EXPONENT = 4
SAMPLES_PER_WINDOW = 400
# Stall detection: cycles at one simulated instant, loop turns at one instant, and starts or
# resizes of one job with no job completing anywhere in between.
MAX_CYCLES_PER_INSTANT = 1000
MAX_TURNS_PER_INSTANT = 100_000
MAX_REPEATS_WITHOUT_COMPLETION = 100
MAX_NAMED_JOBS = 10
ESTIMATE_SAMPLE_JOBS = 2000

# `schedule(snapshot, now, explain=..., kept=...)` with the jobs to explain (none: no
# explanations) and what the replay's `FleetState` keeps for the engine (`FleetState.kept()`), or a
# stand-in with the same contract (tests).
Scheduler = Callable[[Snapshot, float, AbstractSet[str], Kept], Plan]


def engine_scheduler(snapshot: Snapshot, now: float, explain: AbstractSet[str], kept: Kept) -> Plan:
    return schedule(snapshot, now, explain=explain, kept=kept)


def reference_scheduler(snapshot: Snapshot, now: float, explain: AbstractSet[str], kept: Kept) -> Plan:
    """The engine's rules stated plainly (`engine.reference`), keeping the fast engine's quirks: the
    same plans, slowly (it explains every job when asked for any; it keeps nothing between cycles,
    so `kept` is not read)."""
    return schedule_reference(snapshot, now, explain=bool(explain), quirks=FAST_PATH_QUIRKS)


# The engines a replay can run: the fast one, and the plain reference to check it against.
ENGINES: dict[str, Scheduler] = {"fast": engine_scheduler, "reference": reference_scheduler}


class SimulationStalled(RuntimeError):
    """The replay stopped making progress; `jobs` are the ones it kept acting on."""

    def __init__(self, message: str, jobs: Sequence[str], time_s: float) -> None:
        self.jobs, self.time_s = tuple(jobs), time_s
        named = ", ".join(repr(job_id) for job_id in self.jobs[:MAX_NAMED_JOBS])
        more = f" and {len(self.jobs) - MAX_NAMED_JOBS} more" if len(self.jobs) > MAX_NAMED_JOBS else ""
        super().__init__(f"simulation stalled at t={time_s:.0f} s: {message}; jobs involved: {named}{more}")


@dataclass(frozen=True)
class SimResult:
    policy: str
    metrics: dict[str, Any]
    series: Series
    team_shares: tuple[TeamShare, ...]
    jct_s: tuple[float, ...]
    jct_by_job: dict[str, float]
    # The first estimates recorded and how they turned out (`metrics.shown_estimates`).
    estimates: tuple[ShownEstimate, ...] = ()


class _Watchdog:
    """Notices a replay that no longer makes progress (see the module docstring)."""

    def __init__(self) -> None:
        self.instant = -math.inf
        self.cycles_here = 0
        self.turns_here = 0
        self.acted_on: dict[str, None] = {}  # jobs acted on at this instant, in order
        self.repeats: dict[str, int] = {}  # starts and resizes per job since the last completion
        self.preempted_by: dict[str, str] = {}

    def turn(self, now: float) -> None:
        if now != self.instant:
            self.instant, self.cycles_here, self.turns_here = now, 0, 0
            self.acted_on.clear()
        self.turns_here += 1
        if self.turns_here > MAX_TURNS_PER_INSTANT:
            raise SimulationStalled(
                f"simulated time stopped: {self.turns_here} turns of the event loop at this instant",
                list(self.acted_on),
                now,
            )

    def planned(self, plan: Plan, now: float) -> None:
        self.cycles_here += 1
        for action in plan.actions:
            if isinstance(action, Reserve):
                continue
            job_id = getattr(action, "job_id", None)
            if job_id is not None:
                self.acted_on[job_id] = None
            if isinstance(action, Preempt):
                self.preempted_by[action.job_id] = action.reason.removeprefix("preempted-by:")
        if self.cycles_here > MAX_CYCLES_PER_INSTANT:
            raise SimulationStalled(
                f"simulated time stopped: {self.cycles_here} cycles at this instant kept acting",
                list(self.acted_on),
                now,
            )

    def happened(self, events: list[Event]) -> None:
        for event in events:
            if isinstance(event, (Completed, TimedOut)):
                self.repeats.clear()
            elif isinstance(event, (Started, Resized)):
                count = self.repeats[event.job_id] = self.repeats.get(event.job_id, 0) + 1
                if count >= MAX_REPEATS_WITHOUT_COMPLETION:
                    self._repeating(event.job_id, count, event.time_s)

    def _repeating(self, job_id: str, count: int, now: float) -> None:
        others = sorted((c, j) for j, c in self.repeats.items() if j != job_id and c * 2 >= count)
        jobs = [job_id, *(j for _, j in reversed(others))]
        preemptor = self.preempted_by.get(job_id)
        if preemptor is not None and preemptor not in jobs:
            jobs.append(preemptor)
        by = f" (last preempted by {preemptor!r})" if preemptor is not None else ""
        raise SimulationStalled(
            f"job {job_id!r} was started or resized {count} times{by} with no job completing in between",
            jobs,
            now,
        )


@dataclass
class _Loop:
    state: FleetState
    recorder: Recorder
    policy: Policy
    teams: tuple[Team, ...]
    quotas: tuple[Quota, ...]
    scheduler: Scheduler
    watchdog: _Watchdog
    events: int = 0
    cycles: int = 0
    skipped: int = 0
    # Hooks that watch what happens (`Hook.observe`), e.g. serving, to time its replicas' starts.
    observers: tuple[Callable[[list[Event]], None], ...] = ()
    # A hook submitted a job since the last cycle: the next turn plans, as at an arrival.
    hook_submitted: bool = False

    def record(self, events: list[Event]) -> bool:
        if events:
            self.events += len(events)
            self.recorder.record(events)
            self.watchdog.happened(events)
            for observe in self.observers:
                observe(events)
        return bool(events)

    def cycle(self, now: float) -> tuple[bool, bool]:
        """One scheduling cycle; returns (did anything, needs another cycle now)."""
        # Explanations only for the jobs waiting for their first estimate; otherwise the recorder
        # only reads whether some job waits on topology.
        explain = frozenset(self.recorder.awaiting)
        snapshot = self.state.snapshot(now, self.teams, self.quotas, self.policy)
        plan = self.scheduler(snapshot, now, explain, self.state.kept())
        self.cycles += 1
        self.watchdog.planned(plan, now)
        self.recorder.planned(plan, now, explained=bool(explain))
        events = self.state.apply(plan, now)
        self.record(events)
        self.recorder.applied(plan)
        acted = any(not isinstance(action, Reserve) for action in plan.actions)
        again = any(isinstance(event, (Evicted, Resized)) for event in events)
        return acted, again


class ReplayOptions(TypedDict, total=False):
    """The settings `run_simulation` takes by keyword; `ReplaySettings` says what each means and
    holds its default."""

    policy_name: str
    teams: Sequence[Team]
    quotas: Sequence[Quota]
    enforce_quotas: bool
    hooks: Sequence[Hook]
    seed: int
    cycle_interval_s: float
    tick_s: float
    sample_every_s: float | None
    checkpoint_events: bool
    progress: Callable[[float], None] | None
    clock: Callable[[], float]
    state_options: dict[str, float] | None
    skip_idle_cycles: bool
    record_estimates: bool
    estimate_every: int | None
    scheduler: Scheduler


@dataclass(frozen=True, kw_only=True)
class ReplaySettings:
    """How a replay runs (`ReplayOptions` names the same fields for callers).

    `quotas` are what guarantee violations are measured against; `enforce_quotas=False` keeps the
    engine from seeing them (a baseline that ignores quotas, measured against the same guarantees).
    `tick_s` > 0 runs cycles only on ticks (module docstring); 0 at every instant something changed.
    `skip_idle_cycles=False` runs every cycle the gate would skip (same results, slower).
    `record_estimates=False` never asks for explanations (estimate errors are then null). Estimates
    are recorded for every `estimate_every`-th job in submit order (None: every job of a trace of
    up to `ESTIMATE_SAMPLE_JOBS` jobs, an even sample of about that many beyond), since each costs
    a cycle at its arrival that the gate would often skip.
    `clock` only measures `sim_wall_s`; nothing in the simulation reads it. Randomness, if a hook
    needs any, comes from `random.Random(seed)` handed to hooks through their `SimContext`.
    `state_options` go to `FleetState` (storage_gbps, nic_gbps, restart_overhead_s).
    """

    policy_name: str = "fleetline"
    teams: Sequence[Team] = ()
    quotas: Sequence[Quota] = ()
    enforce_quotas: bool = True
    hooks: Sequence[Hook] = ()
    seed: int = 0
    cycle_interval_s: float = 60.0
    tick_s: float = 0.0
    sample_every_s: float | None = None
    checkpoint_events: bool = False
    progress: Callable[[float], None] | None = None
    clock: Callable[[], float] = time.perf_counter
    state_options: dict[str, float] | None = None
    skip_idle_cycles: bool = True
    record_estimates: bool = True
    estimate_every: int | None = None
    scheduler: Scheduler = engine_scheduler


def run_simulation(
    jobs: Sequence[Job], nodes: Sequence[Node], policy: Policy, **options: Unpack[ReplayOptions]
) -> SimResult:
    """Replay `jobs` on `nodes` under `policy` until every job has finished (or can never start),
    as `options` say (`ReplaySettings`).

    Raises `SimulationStalled` when the replay stops making progress.
    """
    settings = ReplaySettings(**options)
    wall_start = settings.clock()
    replay = _Replay.start(sorted(jobs, key=lambda job: job.submit_s), nodes, policy, settings)
    end_s = replay.run()
    replay.loop.recorder.close(end_s)
    return replay.result(settings.clock() - wall_start)


@dataclass
class _Replay:
    """The event loop's own state between turns: the next arrival, whether the last turn changed
    anything, whether the last cycle asked for another at once, and the re-plan back-off."""

    loop: _Loop
    ordered: list[Job]
    settings: ReplaySettings
    context: SimContext
    w0: float
    periodic: bool
    now: float
    index: int = 0
    changed: bool = False
    again: bool = False
    last_cycle: float = -math.inf
    backoff: int = 0

    @classmethod
    def start(cls, ordered: list[Job], nodes: Sequence[Node], policy: Policy, settings: ReplaySettings) -> _Replay:
        w0 = ordered[0].submit_s if ordered else 0.0
        w1 = ordered[-1].submit_s if ordered else 0.0
        teams = tuple(settings.teams) or tuple(Team(name, "fleet") for name in sorted({job.team for job in ordered}))
        quota_rows = tuple(settings.quotas)
        engine_quotas = quota_rows if settings.enforce_quotas else ()
        state = FleetState(
            nodes,
            level_penalty=policy.level_penalty,
            usage_half_life_s=policy.fairshare_half_life_s,
            checkpoint_events=settings.checkpoint_events,
            **(settings.state_options or {}),
            now=w0,
        )
        guarantees = {(q.team, q.accelerator): q.guaranteed for q in quota_rows}
        engine_guarantees = {(q.team, q.accelerator): q.guaranteed for q in engine_quotas}
        weights = {key: float(value) for key, value in guarantees.items()} if any(guarantees.values()) else {}
        estimate_every = (
            (settings.estimate_every or max(1, -(-len(ordered) // ESTIMATE_SAMPLE_JOBS)))
            if settings.record_estimates
            else 0
        )
        recorder = Recorder(
            nodes,
            window=(w0, w1),
            penalty=dict(policy.level_penalty),
            guarantees=guarantees,
            weights=weights,
            sample_every_s=settings.sample_every_s or max(60.0, (w1 - w0) / SAMPLES_PER_WINDOW),
            estimate_every=estimate_every,
        )
        hooks = settings.hooks
        observers = tuple(hook.observe for hook in hooks if isinstance(hook, Observer))
        watchdog = _Watchdog()
        loop = _Loop(state, recorder, policy, teams, engine_quotas, settings.scheduler, watchdog, observers=observers)
        preempt_possible = policy.preemption and (
            any(engine_guarantees.values()) or len({j.priority for j in ordered}) > 1
        )
        elastic_possible = policy.elastic and any(job.is_elastic for job in ordered)
        periodic = settings.cycle_interval_s > 0 and (
            bool(hooks) or policy.fairshare or preempt_possible or elastic_possible
        )
        if settings.skip_idle_cycles and not hooks:
            recorder.gate = CycleGate(
                state, recorder.capacity, policy, strict_fifo=not engine_quotas, guarantees=engine_guarantees
            )
        context = SimContext(state, random.Random(settings.seed), lambda job: _hook_submit(loop, job))
        return cls(loop, ordered, settings, context, w0, periodic, now=w0)

    def run(self) -> float:
        """Turns until nothing is left to happen; returns the simulated time it ended at."""
        while (replan_s := self._next_instant()) is not None:
            self._happen()
            if self._plans(replan_s):
                self._plan()
        return self.now

    def _candidates(self) -> list[float]:
        """The instants something is bound to happen at: the next arrival, FleetState event and hook
        action (and now again, when the last cycle asked for another)."""
        candidates = [self.now] if self.again else []
        if self.index < len(self.ordered):
            candidates.append(self.ordered[self.index].submit_s)
        next_state = self.loop.state.next_event_time()
        if next_state is not None:
            candidates.append(next_state)
        candidates.extend(t for t in (hook.next_time() for hook in self.settings.hooks) if t is not None)
        return candidates

    def _next_instant(self) -> float | None:
        """Moves `now` to the next instant anything happens or a re-plan falls due; returns when the
        next re-plan is due (None: the replay is over, finished or left with jobs that can never
        start)."""
        tick_s = self.settings.tick_s
        candidates = self._candidates()
        replan_s = self.last_cycle + self.settings.cycle_interval_s * 2**self.backoff
        if tick_s > 0:  # cycles run on ticks only
            replan_at = _next_tick(max(replan_s, self.now), self.w0, tick_s)
            if self.changed:
                candidates.append(_next_tick(self.now, self.w0, tick_s))
        else:
            replan_at = replan_s
        replanning = bool(self.loop.state.pending) and self.periodic
        if not candidates and not self.changed:
            if not (replanning and self.backoff < MAX_BACKOFF_EXPONENT):
                return None
            candidates.append(replan_at)
        elif replanning:
            candidates.append(replan_at)
        self.now = max(self.now, min(candidates))
        return replan_s

    def _happen(self) -> None:
        """Everything due at `now`: FleetState events, arrivals and hook actions."""
        loop, now = self.loop, self.now
        loop.watchdog.turn(now)
        loop.recorder.advance_to(now)
        self.changed = loop.record(loop.state.advance(now)) or self.changed
        while self.index < len(self.ordered) and self.ordered[self.index].submit_s <= now:
            _submit(loop, self.ordered[self.index])
            self.index += 1
            self.changed = True
        for hook in self.settings.hooks:
            when = hook.next_time()
            if when is not None and when <= now:
                self.changed = loop.record(hook.on_time(self.context, now)) or self.changed
        if loop.hook_submitted:
            self.changed, loop.hook_submitted = True, False

    def _plans(self, replan_s: float) -> bool:
        """Whether a cycle runs at `now`: something changed, the last cycle asked for another or a
        re-plan is due, and (on ticks) `now` is a tick."""
        due = bool(self.loop.state.pending) and self.periodic and self.now >= replan_s
        if not (self.changed or self.again or due):
            return False
        tick_s = self.settings.tick_s
        # Otherwise planned at the next tick, with whatever else happens until then.
        return not (tick_s > 0 and not self.again and self.now < _next_tick(self.now, self.w0, tick_s))

    def _plan(self) -> None:
        """One cycle at `now`, or the gate's word that it would do nothing."""
        loop, recorder = self.loop, self.loop.recorder
        gate = recorder.gate
        if gate is not None and not recorder.awaiting_estimate() and not gate.could_start():
            loop.skipped += 1
            recorder.fragmented = gate.fragmented
            acted = self.again = False  # what the cycle would have done: nothing (a re-plan all the same)
        else:
            acted, self.again = loop.cycle(self.now)
        self.last_cycle = self.now
        self.backoff = 0 if (self.changed or acted) else min(self.backoff + 1, MAX_BACKOFF_EXPONENT)
        self.changed = False
        progress = self.settings.progress
        if progress is not None and (loop.cycles + loop.skipped) % 256 == 0:
            total = len(self.ordered)
            progress(self.index / total if total else 1.0)

    def result(self, wall_s: float) -> SimResult:
        settings, recorder, loop = self.settings, self.loop.recorder, self.loop
        totals = RunTotals(
            policy_name=settings.policy_name,
            end_s=self.now,
            wall_s=wall_s,
            events=loop.events + len(self.ordered),
            cycles=loop.cycles,
            skipped_cycles=loop.skipped,
            quotas_given=bool(settings.quotas),
            extra={k: v for hook in settings.hooks for k, v in hook.metrics().items()},
        )
        metrics = build_metrics(recorder, self.ordered, totals)
        by_job = {o.job.id: o.end_s - o.job.submit_s for o in recorder.outcomes.values() if o.end_s is not None}
        return SimResult(
            settings.policy_name,
            metrics,
            recorder.series,
            team_shares(recorder),
            tuple(sorted(by_job.values())),
            by_job,
            tuple(shown_estimates(recorder)),
        )


def _next_tick(now: float, w0: float, tick_s: float) -> float:
    """The first tick (w0 + k x tick_s) at or after `now`."""
    return w0 + math.ceil((now - w0) / tick_s - 1e-9) * tick_s


def _submit(loop: _Loop, job: Job) -> None:
    loop.state.submit(job)
    loop.recorder.submitted(job)


def _hook_submit(loop: _Loop, job: Job) -> None:
    _submit(loop, job)
    loop.hook_submitted = True
