"""The queue scan without its shortcuts: the plain definition of `schedule._Cycle._scan`.

`_Cycle._scan` answers the cheap cases inline (unknown accelerator, blocked, the admission memo, a
settled verdict), defers a whole priority level's borrowers in one pass and stops early once every
accelerator is blocked. `schedule_plain_scan` is the same cycle with every job considered in full,
one at a time, so any difference in actions, reasons or estimates is a bug in a shortcut
(`tests/engine/test_queue_tail.py` checks them equal under Hypothesis). Not used by the product.
"""

from __future__ import annotations

from .capacity import AcceleratorPool
from .collector import collector_paused
from .cycle_state import ANY_END_S
from .model import Job, Snapshot
from .placement import could_fit_by_shape
from .plan import REASON_CAPACITY, REASON_PRIORITY, REASON_QUOTA, Plan
from .quota import Admission
from .schedule import _Cycle, smallest_size


def schedule_plain_scan(snapshot: Snapshot, now: float) -> Plan:
    """`schedule.schedule`, with the queue scan considering each job in full."""
    with collector_paused():
        return _PlainScanCycle(snapshot, now).run()


class _PlainScanCycle(_Cycle):
    def _consider_all(self, queue: list[Job]) -> None:
        """The jobs within their guarantee first, whatever their class, then the borrowers by class
        (and `QuotaLedger.borrowers_rank` with `Policy.least_borrowed_first`), when some team had
        guarantee left as the cycle began; otherwise every job in queue order."""
        headroom = self.ledger.any_headroom()
        deferred = [
            (position, job)
            for position, job in enumerate(queue)
            if not self._consider(position, job, defer_borrowers=headroom)
        ]
        if self.policy.least_borrowed_first:
            deferred.sort(key=lambda waiting: (-waiting[1].priority, *self.ledger.borrowers_rank(waiting[1])))
        if deferred and queue[0].priority != queue[-1].priority:
            self.memo.new_pass()
        for waiting in deferred:
            self._consider(*waiting)

    def _smallest_size(self, job: Job) -> int:
        return smallest_size(job.gpus, job.min_gpus, self.policy.elastic)

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
            if refused == REASON_QUOTA:
                self.ledger.hold(job.team, accelerator, size, job.id, self.now - job.submit_s)
            return
        level = job.required_level if job.gpus <= pool.gpus_per_node else self.reclaim.gang_level(pool, job)
        key = (accelerator, job.gpus, size, level, job.preferred_level, admission is None)
        verdict = memo.verdicts.get(key)
        if verdict is not None and verdict.generation == memo.generation and self._settled(accelerator):
            if verdict.worst_end_s == ANY_END_S or self._worst_end_s(job, size, level) >= verdict.worst_end_s:
                decided.reason = verdict.reason
                decided.waiting.add(accelerator)
                self.ledger.hold(job.team, accelerator, size, job.id, self.now - job.submit_s)
                return
        generation = memo.generation
        shaped = could_fit_by_shape(pool, size)
        if not shaped and decided.book.entries and self.policy.backfill:
            shaped = decided.book.could_fit_with_held(pool, size)
        if shaped and admission is not None and self._try_start(job, pool, size, admission):
            return
        if self.reclaim.try_preempt(job, pool, size, admission):
            return
        self._wait(job, pool, size, key, level, generation)
