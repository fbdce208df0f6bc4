"""The cycle's queue-tail shortcuts give exactly the plans of the plain scan.

`_PlainCycle` is the cycle with the queue scan as it was before the shortcuts (every job goes
through admission, the verdict cache, placement, preemption and reservation), so any difference
in actions, reasons or estimates is a bug in a shortcut.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduling.engine import Node, Plan, Policy, Snapshot, schedule
from scheduling.engine.capacity import AcceleratorPool
from scheduling.engine.cycle_state import ANY_END_S, Verdict
from scheduling.engine.model import Job
from scheduling.engine.placement import classify_misfit, could_fit_by_shape
from scheduling.engine.plan import REASON_CAPACITY, REASON_PRIORITY, REASON_TOPOLOGY
from scheduling.engine.quota import Admission
from scheduling.engine.schedule import _Cycle

from .strategies import jobs, snapshots

SETTINGS = settings(max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])

POLICIES = (
    Policy(),
    Policy.easy(),
    Policy.fifo(),
    Policy(reservation_depth=0),
    Policy(reservation_depth=2, max_preemption_attempts=1),
    Policy(preemption_scan_budget=2, elastic=False),
    Policy(preemption=False, reservation_depth=0, topology_aware=False),
    Policy(backfill=False, preemption=False, elastic=False, fairshare=False, reservation_depth=0),
    Policy(within_team_order="las", max_preemption_attempts=2),
)


class _PlainCycle(_Cycle):
    """The queue scan without shortcuts: each job is considered in full."""

    def _consider_all(self, queue: list[Job]) -> None:
        deferred: list[tuple[int, Job]] = []
        priority = None
        for position, job in enumerate(queue):
            if job.priority != priority:
                for waiting in deferred:
                    self._consider(*waiting)
                deferred, priority = [], job.priority
            if not self._consider(position, job, defer_borrowers=True):
                deferred.append((position, job))
        for waiting in deferred:
            self._consider(*waiting)

    def _smallest_size(self, job: Job) -> int:
        if self.policy.elastic and job.is_elastic and job.min_gpus is not None:
            return max(1, job.min_gpus)
        return job.gpus

    def _consider(self, position: int, job: Job, defer_borrowers: bool = False) -> bool:
        """False, having done nothing, for a job beyond its guarantee when `defer_borrowers`."""
        self.decided.at = position
        pool = self.index.pools.get(job.accelerator)
        if pool is None or job.gpus <= 0:
            self.decided.reason = REASON_CAPACITY
            return True
        size = self._smallest_size(job)
        admission, refused = self._admission(job.team, job.accelerator, size, pool, not job.preemptible)
        if defer_borrowers and (
            admission.borrowing
            if admission is not None
            else not self.ledger.within_guarantee(job.team, job.accelerator, size)
        ):
            return False
        self._consider_plainly(job, pool, size, admission, refused)
        return True

    def _consider_plainly(
        self, job: Job, pool: AcceleratorPool, size: int, admission: Admission | None, refused: str | None
    ) -> None:
        accelerator, decided, memo = job.accelerator, self.decided, self.memo
        if accelerator in decided.blocked:
            decided.reason = REASON_PRIORITY
            decided.waiting.add(accelerator)
            return
        if refused:
            decided.reason = refused
            return
        level = job.required_level if job.gpus <= pool.gpus_per_node else self._gang_level(pool, job)
        key = (accelerator, job.gpus, size, level, job.preferred_level, admission is None)
        verdict = memo.verdicts.get(key)
        if verdict is not None and verdict.generation == memo.generation and self._settled(accelerator):
            if verdict.worst_end_s == ANY_END_S or self._worst_end_s(job, size, level) >= verdict.worst_end_s:
                decided.reason = verdict.reason
                decided.waiting.add(accelerator)
                return
        shaped = could_fit_by_shape(pool, size)
        if not shaped and decided.book.entries and self.policy.backfill:
            shaped = decided.book.could_fit_with_held(pool, size)
        if shaped and admission is not None and self._try_start(job, pool, size, admission):
            return
        if self._try_preempt(job, pool, size, admission):
            return
        blocker = decided.reason
        decided.reason = blocker or classify_misfit(pool, job.gpus)
        decided.waiting.add(accelerator)
        if not blocker:
            self._try_reserve(job, pool)
        if not self.policy.backfill:
            decided.blocked.add(accelerator)
        worst_end_s = self._worst_end_s(job, size, level) if blocker else ANY_END_S
        memo.verdicts[key] = Verdict(memo.generation, worst_end_s, decided.reason)


@st.composite
def busy_snapshots(draw: st.DrawFn) -> Snapshot:
    """Small fleets with long queues (so accelerators fill up and settle mid-scan) and mixed policies."""
    base = draw(snapshots(draw(st.sampled_from(POLICIES))))
    extra = draw(st.integers(0, 24))
    more = tuple(draw(jobs(f"k{index}", float(draw(st.integers(0, 40))))) for index in range(extra))
    return Snapshot(base.nodes, base.running, base.pending + more, base.teams, base.quotas, base.policy, base.usage)


@SETTINGS
@given(busy_snapshots(), st.floats(0.0, 2000.0))
def test_the_shortcut_scan_plans_exactly_as_the_plain_scan(snapshot: Snapshot, now: float) -> None:
    assert schedule(snapshot, now) == _PlainCycle(snapshot, now).run()


@SETTINGS
@given(busy_snapshots(), st.floats(0.0, 2000.0))
def test_without_explanations_the_actions_and_topology_waits_are_the_same(snapshot: Snapshot, now: float) -> None:
    full: Plan = schedule(snapshot, now)
    lean = schedule(snapshot, now, explain=False)

    assert lean.actions == full.actions
    assert sorted(s.job_id for s in lean.pending) == sorted(
        s.job_id for s in full.pending if s.reason == REASON_TOPOLOGY
    )
    assert all(s.reason == REASON_TOPOLOGY and s.estimated_start_s is None for s in lean.pending)


def test_a_blocked_fifo_head_ends_the_scan_when_nothing_is_explained() -> None:
    nodes = (Node("n0", "p0", "r0", "a100"),)
    head = Job("head", "alpha", "training", 0, True, "a100", 16, 100.0, 0.0)
    rest = tuple(Job(f"j{index}", "alpha", "training", 0, True, "a100", 1, 100.0, 1.0 + index) for index in range(50))
    snapshot = Snapshot(nodes, (), (head, *rest), (), (), Policy.fifo(), ())

    full = schedule(snapshot, 0.0)
    lean = schedule(snapshot, 0.0, explain=False)

    assert full.actions == lean.actions == ()
    assert [s.reason for s in full.pending] == ["capacity"] + ["priority"] * 50
    assert lean.pending == ()
