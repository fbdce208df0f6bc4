"""The discrete-event loop: arrivals, engine cycles, completions and hook actions over one FleetState.

Time jumps from one event to the next: the next arrival, the next FleetState event (completion,
time limit, end of a preemption grace, checkpoint), the next hook action, or the next periodic
re-plan. A scheduling cycle (snapshot -> `schedule` -> `apply`) runs when something changed.

Two shortcuts keep long traces fast without changing any decision:
- A cycle after nothing but arrivals is skipped when none of the new jobs fits the free GPUs by
  count and the policy cannot preempt or resize (nothing else changed, so nothing else could
  start); under strict FIFO it is also skipped when an older job of at least the same priority is
  still waiting, since the blocked head blocks everyone behind it.
- Periodic re-plans (`cycle_interval_s`) only run for policies whose decisions depend on time
  (fair share decay, preemption, elastic growth) and back off (x2, up to x16) while they change
  nothing; any real change resets them.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from scheduling.engine import Event, Evicted, FleetState, Job, Node, Policy, Quota, Reserve, Resized, Team, schedule

from .gate import CycleGate
from .hooks import Hook, SimContext
from .metrics import TeamShare, build_metrics, team_shares
from .recorder import Recorder, Series

MAX_BACKOFF_EXPONENT = 4
SAMPLES_PER_WINDOW = 400


@dataclass(frozen=True)
class SimResult:
    policy: str
    metrics: dict[str, Any]
    series: Series
    team_shares: tuple[TeamShare, ...]
    jct_s: tuple[float, ...]
    jct_by_job: dict[str, float]


@dataclass
class _Loop:
    state: FleetState
    recorder: Recorder
    policy: Policy
    teams: tuple[Team, ...]
    quotas: tuple[Quota, ...]
    events: int = 0
    cycles: int = 0
    skipped: int = 0

    def record(self, events: list[Event]) -> bool:
        if events:
            self.events += len(events)
            self.recorder.record(events)
        return bool(events)

    def cycle(self, now: float) -> tuple[bool, bool]:
        """One scheduling cycle; returns (did anything, needs another cycle now)."""
        # The recorder only reads whether some job waits on topology: no estimates needed.
        plan = schedule(self.state.snapshot(now, self.teams, self.quotas, self.policy), now, explain=False)
        self.cycles += 1
        self.recorder.planned(plan)
        events = self.state.apply(plan, now)
        self.record(events)
        acted = any(not isinstance(action, Reserve) for action in plan.actions)
        again = any(isinstance(event, (Evicted, Resized)) for event in events)
        return acted, again


def run_simulation(
    jobs: Sequence[Job],
    nodes: Sequence[Node],
    policy: Policy,
    *,
    policy_name: str = "fleetline",
    teams: Sequence[Team] = (),
    quotas: Sequence[Quota] = (),
    hooks: Sequence[Hook] = (),
    seed: int = 0,
    cycle_interval_s: float = 60.0,
    sample_every_s: float | None = None,
    checkpoint_events: bool = False,
    progress: Callable[[float], None] | None = None,
    clock: Callable[[], float] = time.perf_counter,
    state_options: dict[str, float] | None = None,
    skip_idle_cycles: bool = True,
) -> SimResult:
    """Replay `jobs` on `nodes` under `policy` until every job has finished (or can never start).

    `skip_idle_cycles=False` runs every cycle the gate would skip (same results, slower).
    `clock` only measures `sim_wall_s`; nothing in the simulation reads it. Randomness, if a hook
    needs any, comes from `random.Random(seed)` handed to hooks through their `SimContext`.
    """
    wall_start = clock()
    ordered = sorted(jobs, key=lambda job: job.submit_s)
    w0 = ordered[0].submit_s if ordered else 0.0
    w1 = ordered[-1].submit_s if ordered else 0.0
    team_rows = tuple(teams) or tuple(Team(name, "fleet") for name in sorted({job.team for job in ordered}))
    quota_rows = tuple(quotas)
    state = FleetState(
        nodes,
        level_penalty=policy.level_penalty,
        usage_half_life_s=policy.fairshare_half_life_s,
        checkpoint_events=checkpoint_events,
        **(state_options or {}),  # storage_gbps, nic_gbps, restart_overhead_s
        now=w0,
    )
    guarantees = {(q.team, q.accelerator): q.guaranteed for q in quota_rows}
    weights = {key: float(value) for key, value in guarantees.items()} if any(guarantees.values()) else {}
    step = sample_every_s or max(60.0, (w1 - w0) / SAMPLES_PER_WINDOW)
    recorder = Recorder(
        nodes,
        window=(w0, w1),
        penalty=dict(policy.level_penalty),
        guarantees=guarantees,
        weights=weights,
        sample_every_s=step,
    )
    loop = _Loop(state, recorder, policy, team_rows, quota_rows)
    context = SimContext(state, random.Random(seed), lambda job: _submit(loop, job))

    preempt_possible = policy.preemption and (any(guarantees.values()) or len({j.priority for j in ordered}) > 1)
    elastic_possible = policy.elastic and any(job.is_elastic for job in ordered)
    periodic = cycle_interval_s > 0 and (bool(hooks) or policy.fairshare or preempt_possible or elastic_possible)
    if skip_idle_cycles and not (preempt_possible or elastic_possible or hooks):
        recorder.gate = CycleGate(state, recorder.capacity, policy, strict_fifo=not quota_rows)

    index, total = 0, len(ordered)
    changed, again = False, False
    last_cycle, backoff = -math.inf, 0
    now = w0
    while True:
        candidates = [now] if again else []
        if index < total:
            candidates.append(ordered[index].submit_s)
        next_state = state.next_event_time()
        if next_state is not None:
            candidates.append(next_state)
        candidates.extend(t for t in (hook.next_time() for hook in hooks) if t is not None)
        replan_s = last_cycle + cycle_interval_s * 2**backoff
        if not candidates and not changed:
            if not (state.pending and periodic and backoff < MAX_BACKOFF_EXPONENT):
                break  # finished, or what is left can never start
            candidates.append(replan_s)
        elif state.pending and periodic:
            candidates.append(replan_s)
        now = max(now, min(candidates))
        recorder.advance_to(now)
        changed = loop.record(state.advance(now)) or changed
        while index < total and ordered[index].submit_s <= now:
            _submit(loop, ordered[index])
            index += 1
            changed = True
        for hook in hooks:
            when = hook.next_time()
            if when is not None and when <= now:
                changed = loop.record(hook.on_time(context, now)) or changed
        due = bool(state.pending) and periodic and now >= replan_s
        if not (changed or again or due):
            continue
        if recorder.gate is not None and not again and not recorder.gate.could_start():
            loop.skipped += 1
            recorder.fragmented = recorder.gate.fragmented
            last_cycle = now  # a skipped cycle counts as a re-plan that changed nothing
        else:
            acted, again = loop.cycle(now)
            last_cycle = now
            backoff = 0 if (changed or acted) else min(backoff + 1, MAX_BACKOFF_EXPONENT)
        changed = False
        if progress is not None and (loop.cycles + loop.skipped) % 256 == 0:
            progress(index / total if total else 1.0)
    recorder.close(now)
    wall_s = clock() - wall_start
    extra = {k: v for hook in hooks for k, v in hook.metrics().items()}
    metrics = build_metrics(
        recorder,
        ordered,
        policy_name=policy_name,
        end_s=now,
        wall_s=wall_s,
        events=loop.events + total,
        cycles=loop.cycles,
        skipped_cycles=loop.skipped,
        quotas_given=bool(quota_rows),
        extra=extra,
    )
    by_job = {o.job.id: o.end_s - o.job.submit_s for o in recorder.outcomes.values() if o.end_s is not None}
    return SimResult(
        policy_name, metrics, recorder.series, team_shares(recorder), tuple(sorted(by_job.values())), by_job
    )


def _submit(loop: _Loop, job: Job) -> None:
    loop.state.submit(job)
    loop.recorder.submitted(job)
