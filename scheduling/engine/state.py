"""FleetState: the one model of a fleet advancing in time, shared by the simulator and live loop.

Progress is evaluated lazily: each running job keeps an anchor (time, progress) and a rate, so
advancing time costs O(events), not O(running jobs). The rate is the allocated share of the
requested size divided by the topology penalty of the placement level. Checkpoints happen every
`checkpoint_interval_s` of work counted from the progress the job (re)started with; a restart
first pays the restore time (checkpoint bytes of all jobs restarting together through shared
storage, capped per node by the NIC).

A preemption whose GPUs a start of the same plan takes over (`Start.replaces`) is a handover: the
victim leaves at once, keeping its last checkpoint (or, if it checkpoints on preemption, all its
progress), and the new job spends the grace period before it makes progress, as while a restore
runs. Any other preemption lets the victim run on until its grace period ends.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from dataclasses import replace

from .capacity import level_of
from .events import Checkpointed, Completed, Event, Evicted, Rejected, Resized, Started, TimedOut, Withdrawn
from .kept import Kept
from .model import DEFAULT_LEVEL_PENALTY, Job, Node, Policy, Quota, Snapshot, Team
from .node_cache import NodeCache
from .ordering import KeptQueue, kept_by_team, tiebreak_fields
from .plan import FAILURE_REASONS, Cordon, Grow, Plan, Preempt, Requeue, Shrink, Start
from .prepare import KeptReleases, RunningBook
from .progress import (
    kept_on_eviction,
    next_checkpoint_progress,
    progress_rate,
    restore_time_s,
    time_at_progress,
    work_gpu_s,
)
from .runs import Counters, DecayedUsage, RunRecord, RunView, SnapshotClock, show_running

_COMPLETE, _TIMEOUT, _GRACE, _CHECKPOINT = 0, 1, 2, 3


class FleetState:
    """Nodes, running and pending jobs, advanced by time and changed by plans."""

    def __init__(
        self,
        nodes: Iterable[Node],
        *,
        level_penalty: tuple[tuple[str, float], ...] = DEFAULT_LEVEL_PENALTY,
        usage_half_life_s: float = Policy().fairshare_half_life_s,
        storage_gbps: float = 50.0,
        nic_gbps: float = 12.5,
        checkpoint_events: bool = True,
        restart_overhead_s: float = 0.0,
        now: float = 0.0,
    ) -> None:
        self.nodes: dict[str, Node] = {node.id: node for node in sorted(nodes, key=lambda n: n.id)}
        self.node_used: dict[str, int] = {node_id: 0 for node_id in self.nodes}
        # Healthy GPUs of uncordoned nodes (`Node.usable_gpus`), kept as nodes change.
        self.node_usable: dict[str, int] = {node_id: node.usable_gpus for node_id, node in self.nodes.items()}
        self._rack = {node.id: node.rack_key for node in self.nodes.values()}
        self._pod = {node.id: node.pod for node in self.nodes.values()}
        self.penalty = dict(level_penalty)
        self.storage_gbps, self.nic_gbps, self.restart_overhead_s = storage_gbps, nic_gbps, restart_overhead_s
        self.checkpoint_events = checkpoint_events
        self.now = now
        self.running: dict[str, RunRecord] = {}
        self.pending: dict[str, Job] = {}
        # `pending` in within-team order, kept from the first snapshot on (`_queue_job`, `_unqueue`).
        self._queue: KeptQueue | None = None
        self.saved_progress: dict[str, float] = {}
        self._heap: list[tuple[float, int, int, str, int]] = []
        self._seq = 0
        self._allocated = 0
        self._accrued_s = now
        self._allocated_gpu_s = self._useful_gpu_s = self._lost_gpu_s = self._restore_gpu_s = 0.0
        self._completed = self._timed_out = self._evictions = 0
        self._usage = DecayedUsage(usage_half_life_s)
        # What the running jobs add up to apart from the time, kept as they change (`_take`, `_preempt`).
        self._book = RunningBook()
        # The running jobs' releases, kept as they change (`_keep`), and the latest time one was kept.
        self._kept = KeptReleases()
        self._kept_at = now
        self._node_tuple: tuple[Node, ...] | None = None
        # The empty-fleet index and cordons of `_node_tuple`, kept for the engine while nodes stay
        # the same (bound: one node tuple), and what the latest snapshot's cycle may read (`kept`).
        self._node_cache = NodeCache()
        self._handed = Kept(nodes=self._node_cache)
        # The time of the latest snapshot, which the running jobs it shows read their progress at.
        self._clock = SnapshotClock(now)

    # Queue -------------------------------------------------------------------------------------
    def submit(self, job: Job, saved_progress_s: float = 0.0) -> None:
        """Queue a job; ``saved_progress_s`` is work kept in a checkpoint from an earlier run."""
        self._queue_job(job)
        if saved_progress_s > 0:
            self.saved_progress[job.id] = saved_progress_s

    def restore(
        self,
        job: Job,
        allocation: tuple[tuple[str, int], ...],
        *,
        start_s: float,
        borrowing: bool,
        anchor_s: float | None,
        anchor_progress_s: float,
        base_progress_s: float,
        grace_until_s: float | None = None,
    ) -> None:
        """Adopt a job that is already running, as recorded elsewhere (the live cycle rebuilds
        its state from the database every tick). Progress is ``anchor_progress_s`` at
        ``anchor_s`` and grows at the rate its size and placement level give."""
        run = RunRecord(job, allocation, start_s, level_of((n for n, _ in allocation), self._rack, self._pod))
        run.borrowing, run.grace_until_s = borrowing, grace_until_s
        run.anchor_s = start_s if anchor_s is None else anchor_s
        run.anchor_progress, run.base_progress = anchor_progress_s, base_progress_s
        run.rate = self._rate(job, run.gpus, run.level)
        self._reanchor(run, self.now)
        self._accrue(self.now)
        self._take(run, +1)
        self.running[job.id] = run
        self._keep(run, self.now)
        self._schedule_events(run, self.now)

    def run_view(self, job_id: str) -> RunView | None:
        """A read-only view of a running job, for whoever records the state elsewhere."""
        run = self.running.get(job_id)
        if run is None:
            return None
        return RunView(
            run.job,
            run.allocation,
            run.start_s,
            run.level,
            run.borrowing,
            run.grace_until_s,
            run.anchor_s,
            run.anchor_progress,
            run.base_progress,
            run.gpus,
        )

    def cancel(self, job_id: str) -> bool:
        return self._unqueue(job_id) is not None

    def _queue_job(self, job: Job) -> None:
        queued = self.pending.get(job.id)
        self.pending[job.id] = job
        if self._queue is not None:
            if queued is not None:
                self._queue.remove(queued)
            self._queue.add(job)

    def _unqueue(self, job_id: str) -> Job | None:
        job = self.pending.pop(job_id, None)
        if job is not None and self._queue is not None:
            self._queue.remove(job)
        return job

    def withdraw(self, job_id: str, now: float) -> list[Event]:
        """End a job from outside before its work is done (a serving replica scaled down with its
        demand): running, its work so far counts as done and its GPUs are free at once; pending, it
        leaves the queue. Returns what happened on the way to `now` and the `Withdrawn` (nothing
        more for a job that is neither)."""
        events = self.advance(now) if now > self.now else []
        run = self.running.get(job_id)
        if run is not None:
            self._accrue(now)
            self._finish(run, now)
            events.append(Withdrawn(job_id, now, True))
        elif self._unqueue(job_id) is not None:
            self.saved_progress.pop(job_id, None)
            events.append(Withdrawn(job_id, now, False))
        return events

    # Time --------------------------------------------------------------------------------------
    def next_event_time(self) -> float | None:
        heap = self._heap
        while heap:
            time_s, _, kind, job_id, version = heap[0]
            run = self.running.get(job_id)
            if run is not None and run.version == version:
                return time_s
            heapq.heappop(heap)
        return None

    def advance(self, to_s: float) -> list[Event]:
        """Move time forward to `to_s`, returning what happened on the way, in order."""
        events: list[Event] = []
        heap = self._heap
        while heap and heap[0][0] <= to_s:
            time_s, _, kind, job_id, version = heapq.heappop(heap)
            run = self.running.get(job_id)
            if run is None or run.version != version:
                continue
            self._accrue(time_s)
            if kind == _COMPLETE:
                self._finish(run, time_s)
                self._completed += 1
                events.append(Completed(job_id, time_s))
            elif kind == _TIMEOUT:
                progress = run.progress_at(time_s)
                self._finish(run, time_s)
                self._timed_out += 1
                events.append(TimedOut(job_id, time_s, progress))
            elif kind == _GRACE:
                events.append(self._evict(run, time_s, "preempted"))
            else:
                events.append(Checkpointed(job_id, time_s, run.checkpoint_at(time_s)))
                self._push_checkpoint(run, time_s)
        self._accrue(max(to_s, self.now))
        self.now = max(self.now, to_s)
        return events

    # Plans -------------------------------------------------------------------------------------
    def apply(self, plan: Plan, now: float) -> list[Event]:
        """Carry out a plan; actions that no longer fit the state are `Rejected`, not half-done."""
        events = self.advance(now) if now > self.now else []
        later: list[Start | Grow] = []
        handed_over = {victim for action in plan.actions if isinstance(action, Start) for victim in action.replaces}
        handover_s: dict[str, float] = {}
        for action in plan.actions:
            if isinstance(action, Cordon):
                self._set_node(replace(self.nodes[action.node_id], cordoned=True))
            elif isinstance(action, Requeue):
                run = self.running.get(action.job_id)
                if run is not None:
                    events.append(self._evict(run, now, action.reason))
            elif isinstance(action, Preempt):
                if action.job_id in handed_over:
                    handover_s[action.job_id] = max(0.0, action.grace_s)
                events.extend(self._preempt(action, now, action.job_id in handed_over))
            elif isinstance(action, Shrink):
                events.append(self._resize(action.job_id, action.allocation, now, False))
            elif isinstance(action, (Start, Grow)):
                later.append(action)
        starts = [action for action in later if isinstance(action, Start)]
        events.extend(self._start_all(starts, now, handover_s))
        for action in later:
            if isinstance(action, Grow):
                events.append(self._resize(action.job_id, action.allocation, now, action.borrowing))
        return events

    def snapshot(
        self,
        now: float,
        teams: tuple[Team, ...],
        quotas: tuple[Quota, ...],
        policy: Policy,
        usage: tuple[tuple[str, float], ...] | None = None,
    ) -> Snapshot:
        if self._node_tuple is None:
            self._node_tuple = tuple(self.nodes.values())
        self._clock.now = now
        running = show_running(self.running.values(), self._clock)
        usage = self.usage(now) if usage is None else usage
        book = self._book.copy(running)
        if now >= self._kept_at:
            kept = self._kept.at(now)
            if kept is not None:
                book.kept, book.kept_now = kept, now
        pending = tuple(self.pending.values())
        fields, by_team = tiebreak_fields(policy), kept_by_team(policy)
        if by_team is None:
            self._queue = None  # an order sorted every cycle
        elif self._queue is None or self._queue.fields != fields or self._queue.by_team is not by_team:
            self._queue = KeptQueue(fields, by_team, pending)
        queue = None if self._queue is None else self._queue.view(pending)
        self._handed = Kept(book, queue, self._node_cache)
        return Snapshot(self._node_tuple, running, pending, teams, quotas, policy, usage)

    def kept(self) -> Kept:
        """What this state keeps for the engine's cycle on its latest snapshot, passed as
        `schedule(snapshot, now, kept=state.kept())`: the running jobs' book, the queue in
        within-team order and the node tuple's empty-fleet index and cordons (`kept.Kept`). Each
        part is read only with the snapshot it was made for; with any other it is passed over."""
        return self._handed

    # Failures ----------------------------------------------------------------------------------
    def set_node_health(self, node_id: str, healthy_gpus: int, now: float | None = None) -> list[Event]:
        when = self.now if now is None else now
        events = self.advance(when) if when > self.now else []
        node = replace(self.nodes[node_id], healthy_gpus=max(0, healthy_gpus))
        self._set_node(node)
        if self.node_used[node_id] > node.usable_gpus or node.healthy_gpus < self.node_used[node_id]:
            for run in self._runs_on(node_id):
                events.append(self._evict(run, when, "node-degraded"))
        return events

    def fail_node(self, node_id: str, now: float) -> list[Event]:
        events = self.advance(now) if now > self.now else []
        self._set_node(replace(self.nodes[node_id], healthy_gpus=0))
        for run in self._runs_on(node_id):
            events.append(self._evict(run, now, "node-failed"))
        return events

    def throttle_node(self, node_id: str, slowdown: float, now: float) -> list[Event]:
        """Jobs on the node progress ``slowdown`` x slower from ``now`` (inf: stalled; 1.0: full speed)."""
        events = self.advance(now) if now > self.now else []
        for run in self._runs_on(node_id):
            self._reanchor(run, now)
            run.rate = self._rate(run.job, run.gpus, run.level) / max(1.0, slowdown)
            self._schedule_events(run, now)
        return events

    # Accounting --------------------------------------------------------------------------------
    def counters(self) -> Counters:
        self._accrue(self.now)
        in_flight = sum(
            work_gpu_s(run.progress_at(self.now), run.base_progress, run.job.gpus) for run in self.running.values()
        )
        return Counters(
            self._allocated_gpu_s,
            self._useful_gpu_s + in_flight,
            self._lost_gpu_s,
            self._restore_gpu_s,
            self._completed,
            self._timed_out,
            self._evictions,
        )

    def usage(self, now: float) -> tuple[tuple[str, float], ...]:
        """Decayed GPU-seconds per team at `now` (half-life `usage_half_life_s`)."""
        return self._usage.all_at(now)

    def free_gpus(self, node_id: str) -> int:
        return max(0, self.node_usable[node_id] - self.node_used[node_id])

    # Internals ---------------------------------------------------------------------------------
    def _accrue(self, time_s: float) -> None:
        if time_s > self._accrued_s:
            self._allocated_gpu_s += self._allocated * (time_s - self._accrued_s)
            self._accrued_s = time_s

    def _set_node(self, node: Node) -> None:
        self.nodes[node.id] = node
        self.node_usable[node.id] = node.usable_gpus
        self._node_tuple = None

    def _runs_on(self, node_id: str) -> list[RunRecord]:
        return sorted(
            (run for run in self.running.values() if any(n == node_id for n, _ in run.allocation)),
            key=lambda run: run.job.id,
        )

    def _push(self, time_s: float, kind: int, run: RunRecord) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (time_s, self._seq, kind, run.job.id, run.version))

    def _schedule_events(self, run: RunRecord, now: float) -> None:
        # Versions are unique across runs, so events of an earlier run of the same job go stale.
        self._seq += 1
        run.version = self._seq
        run.shown = None
        job = run.job
        run.release = None
        if run.rate > 0:
            remaining = max(0.0, job.duration_s - run.anchor_progress)
            self._push(max(now, run.anchor_s) + remaining / run.rate, _COMPLETE, run)
            if job.time_limit_s is None and run.rate == self._rate(job, run.gpus, run.level):
                run.release = run.anchor_s + remaining / run.rate
        if job.time_limit_s is not None:
            self._push(max(now, run.start_s + job.time_limit_s), _TIMEOUT, run)
        if run.grace_until_s is not None:
            self._push(max(now, run.grace_until_s), _GRACE, run)
        self._push_checkpoint(run, now)
        self._keep(run, now)

    def _keep(self, run: RunRecord, now: float) -> None:
        """Enter or replace `run`'s release in `_kept`: its grace, its time limit or its anchored
        release (`runs.anchored_release_s`), else one that depends on the time."""
        job, anchor_s = run.job, None
        if run.grace_until_s is not None:
            end_s: float | None = run.grace_until_s
        elif job.time_limit_s is not None:
            end_s = run.start_s + job.time_limit_s
        else:
            end_s = run.release
            if end_s is not None and run.anchor_s > now:
                anchor_s = run.anchor_s
        self._kept.keep(job, run.allocation, run.gpus, end_s, anchor_s)
        self._kept_at = max(self._kept_at, now)

    def _push_checkpoint(self, run: RunRecord, now: float) -> None:
        interval = run.job.checkpoint_interval_s
        if not self.checkpoint_events or not interval or interval <= 0 or run.rate <= 0:
            return
        next_progress = next_checkpoint_progress(run.checkpoint_at(now), interval, run.job.duration_s)
        if next_progress is None:
            return
        when = time_at_progress(run.anchor_s, run.anchor_progress, run.rate, next_progress)
        self._push(max(when, now), _CHECKPOINT, run)

    def _rate(self, job: Job, gpus: int, level: str) -> float:
        return progress_rate(gpus, job.gpus, self.penalty.get(level, 1.0))

    def _reanchor(self, run: RunRecord, now: float) -> None:
        if now > run.anchor_s:
            run.anchor_progress = run.progress_at(now)
            run.anchor_s = now

    def _take(self, run: RunRecord, sign: int) -> None:
        for node_id, gpus in run.allocation:
            self.node_used[node_id] += sign * gpus
        self._allocated += sign * run.gpus
        self._usage.charge(run.job.team, self._accrued_s, sign * run.gpus)
        self._book.count(run.job, run.gpus, run.borrowing, run.grace_until_s is not None, sign)

    def _finish(self, run: RunRecord, time_s: float) -> None:
        self._useful_gpu_s += work_gpu_s(run.progress_at(time_s), run.base_progress, run.job.gpus)
        self._take(run, -1)
        del self.running[run.job.id]
        self._kept.forget(run.job)
        self.saved_progress.pop(run.job.id, None)
        run.version = -1

    def _evict(self, run: RunRecord, time_s: float, reason: str, *, signalled: bool = False) -> Evicted:
        """Requeue `run` rolled back to where it was when told it is preempted (`signalled`: now) if
        it checkpoints then, else to its last checkpoint, else to the progress it started with."""
        self._accrue(time_s)
        job = run.job
        progress = run.progress_at(time_s)
        signal_progress = progress if signalled else run.signal_progress
        kept = kept_on_eviction(progress, run.checkpoint_at(time_s), job.checkpoint_on_preempt, signal_progress)
        lost = work_gpu_s(progress, kept, job.gpus)
        self._useful_gpu_s += work_gpu_s(kept, run.base_progress, job.gpus)
        self._lost_gpu_s += lost
        self._evictions += 1
        self._take(run, -1)
        del self.running[run.job.id]
        self._kept.forget(run.job)
        run.version = -1
        attained = run.job.attained_gpu_s + max(0.0, time_s - run.start_s) * run.gpus
        failed = reason in FAILURE_REASONS
        self._queue_job(replace(run.job, attained_gpu_s=attained, requeued_by_failure=failed))
        self.saved_progress[run.job.id] = kept
        return Evicted(run.job.id, time_s, reason, lost)

    def _preempt(self, action: Preempt, now: float, handed_over: bool) -> list[Event]:
        run = self.running.get(action.job_id)
        if run is None:
            return [Rejected(action.job_id, now, "not-running")]
        if action.grace_s <= 0 or handed_over:
            return [self._evict(run, now, action.reason, signalled=True)]
        if run.grace_until_s is None:
            self._book.count(run.job, run.gpus, run.borrowing, False, -1)
            run.grace_until_s = now + action.grace_s
            self._book.count(run.job, run.gpus, run.borrowing, True, +1)
            self._reanchor(run, now)
            if run.job.checkpoint_on_preempt:
                run.signal_progress = run.progress_at(now)
            self._schedule_events(run, now)
        return []

    def _fits(self, allocation: tuple[tuple[str, int], ...], accelerator: str, held: dict[str, int]) -> bool:
        for node_id, gpus in allocation:
            node = self.nodes.get(node_id)
            if node is None or node.accelerator != accelerator or gpus <= 0:
                return False
            if self.node_used[node_id] - held.get(node_id, 0) + gpus > node.usable_gpus:
                return False
        return len({node_id for node_id, _ in allocation}) == len(allocation)

    def _start_all(self, starts: list[Start], now: float, handover_s: dict[str, float]) -> list[Event]:
        """Start what fits, all at once (they restore their checkpoints together); a start that
        takes over preempted jobs' GPUs first waits out their grace (`handover_s` by victim)."""
        valid: list[tuple[Start, Job]] = []
        events: list[Event] = []
        for action in starts:
            job = self.pending.get(action.job_id)
            if job is None or not self._fits(action.allocation, job.accelerator, {}):
                events.append(Rejected(action.job_id, now, "not-pending" if job is None else "no-capacity"))
                continue
            run = RunRecord(
                job, action.allocation, now, level_of((n for n, _ in action.allocation), self._rack, self._pod)
            )
            run.borrowing = action.borrowing
            self._accrue(now)
            self._take(run, +1)
            self._unqueue(job.id)
            self.running[job.id] = run  # its release is kept once it is launched (`_schedule_events`)
            valid.append((action, job))
        restoring_gb = sum(job.checkpoint_gb for _, job in valid if self.saved_progress.get(job.id, 0.0) > 0)
        for action, job in valid:
            waited_s = max((handover_s.get(victim, 0.0) for victim in action.replaces), default=0.0)
            events.append(self._launch(self.running[job.id], now, restoring_gb, waited_s))
        return events

    def _launch(self, run: RunRecord, now: float, restoring_gb: float, handover_s: float) -> Started:
        """A started run makes progress once its handover and its restore are over."""
        job = run.job
        saved = self.saved_progress.get(job.id, 0.0)
        if saved > 0:
            restore_s = restore_time_s(
                checkpoint_gb=job.checkpoint_gb,
                nodes=len(run.allocation),
                storage_gbps=self.storage_gbps,
                nic_gbps=self.nic_gbps,
                overhead_s=self.restart_overhead_s,
                concurrent_gb=restoring_gb,
            )
        else:  # nothing to read back; a job that ran before still starts its containers again
            restore_s = self.restart_overhead_s if job.attained_gpu_s > 0 else 0.0
        restore_s += handover_s
        self._restore_gpu_s += restore_s * run.gpus
        run.anchor_s, run.anchor_progress, run.base_progress = now + restore_s, saved, saved
        run.rate = self._rate(job, run.gpus, run.level)
        self._schedule_events(run, now)
        return Started(job.id, now, run.allocation, run.level, restore_s, handover_s)

    def _resize(self, job_id: str, allocation: tuple[tuple[str, int], ...], now: float, borrowing: bool) -> Event:
        run = self.running.get(job_id)
        if run is None:
            return Rejected(job_id, now, "not-running")
        if not self._fits(allocation, run.job.accelerator, dict(run.allocation)):
            return Rejected(job_id, now, "no-capacity")
        self._accrue(now)
        self._reanchor(run, now)
        self._take(run, -1)
        run.allocation = allocation
        run.gpus = sum(gpus for _, gpus in allocation)
        run.level = level_of((n for n, _ in allocation), self._rack, self._pod)
        run.borrowing = run.borrowing or borrowing
        self._take(run, +1)
        run.rate = self._rate(run.job, run.gpus, run.level)
        self._schedule_events(run, now)
        return Resized(job_id, now, allocation)
