"""The fast cycle's working state, in named parts: `schedule._Cycle` keeps one of each.

- `Decisions`: what the cycle has decided so far, which becomes its plan: the actions, a reason
  per queue position (`at`: the job being considered), estimated starts, the victims picked, the
  reservations held, and the accelerators where a job was left waiting or that are blocked.
- `Memo`: what the cycle remembers so as not to find the same answer twice, each field declaring
  what makes it stale (`memo.Until`). Most answers are kept with the `generation` of the working
  state they were found on, and hold while the generation stays the same; `Memo.invalidate` is the
  one place the generation moves, and the cycle calls it from the one place its working state
  changes (`_Cycle._record`: a start or a reservation). The admissions and what a team is owed are
  kept by what they read instead (the quota ledger's version, and the accelerator's free GPUs),
  which a reservation leaves alone. The accelerators with no victims and the settled ones hold
  for a pass (`Memo.new_pass`), the victim candidates for the whole cycle.
- `Budgets`: what bounds the cycle's work, whatever it finds: preemption attempts, the victim
  candidates searches may still look at, reservation attempts per accelerator.

The memos' records are named tuples (`Verdict`, `CachedAdmission`, ...), read by name; their
keys are plain tuples with their fields named below (only hashed, never read).

`Statement` makes tentative changes to the working state that are then committed or discarded as
one (Volcano's `Statement`), so that whatever a look does not keep is undone in a `finally`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import NamedTuple

from .backfill import EXTRA_RESERVATION_ATTEMPTS, EarliestStart, ReservationBook
from .memo import Until, fields_until, stale_when
from .model import Policy
from .plan import Action
from .preemption import VictimChoice, Victims
from .quota import Admission

# The memos' keys are plain tuples, their fields named here: they are only hashed and compared,
# never read, and they are built where the cycle is hottest (fast path: a named tuple's
# constructor in the queue scan alone cost about a tenth of a cycle at 80,000 pending jobs).
#
# A placement question by shape: accelerator, GPUs, the level it must fit within.
FitKey = tuple[str, int, str]
# What a job's full look depends on besides the working state and its worst-case end: the
# accelerator, the job's GPUs, the smallest size it may start at, the level it may take now
# (`gang_level`, or its required one), its preferred level, and whether quota admits no start.
VerdictKey = tuple[str, int, int, str | None, str | None, bool]
# A quota admission's question: team, accelerator, size, whether nobody may preempt the work.
AdmissionKey = tuple[str, str, int, bool]
# What a victim search depends on besides the working state, the scan budget and the cost cap
# (kept in its `Fruitless` record): the preemptor's accelerator, GPUs, level, team, priority and
# kind, whether it reclaims (and whether only loans whose lost work is bounded: a partial reclaim).
SearchKey = tuple[str, int, str, str, int, str, bool, bool]
# What `Reclaimer.cannot_preempt` reads of a job: its team, accelerator, size, priority and
# whether it may preempt at all.
PreemptorKey = tuple[str, str, int, int, bool]


# A verdict that holds for a job of its shape however early the job would end.
ANY_END_S = -math.inf


class Verdict(NamedTuple):
    """How a full look at a job ended (`reason`), for later jobs of the same shape: it holds for
    those that would end no earlier than `worst_end_s` (`ANY_END_S`: all of them)."""

    generation: int
    worst_end_s: float
    reason: str


class CachedAdmission(NamedTuple):
    """A quota admission and the reason when waiting cannot be helped by capacity, valid while the
    ledger's version and the accelerator's free GPUs are those it was found with; and whether the
    size lies beyond what is left of the team's guarantee (`not QuotaLedger.within_guarantee`,
    which reads only the ledger), asked of every job of a long queue that quota does not admit."""

    ledger_version: int
    total_free: int
    admission: Admission | None
    refused: str | None
    beyond: bool


class BackfillMiss(NamedTuple):
    """A look around the reservations that found nothing: a job ending no earlier fails too."""

    generation: int
    worst_end_s: float
    reason: str


class Fruitless(NamedTuple):
    """A victim search that found nothing with cost cap `cap`, and the candidates it visited: one
    with a cap no higher finds nothing either (`Reclaimer._fruitless_again`)."""

    generation: int
    visited: int
    cap: float


class Walked(NamedTuple):
    """A victim search, what it found (None: nothing) and the candidates it visited: one with the
    same key and a cost cap above `above` and at most `below` finds the same
    (`Reclaimer._walked_again`)."""

    generation: int
    visited: int
    above: float
    below: float
    choice: VictimChoice | None


@dataclass(slots=True)
class Decisions:
    """What the cycle decided so far."""

    actions: list[Action]
    # Reasons by queue position (None: none yet; `explain.STARTED`); `at`: the job being considered.
    reasons: list[str | None] = field(default_factory=list)
    at: int = 0
    estimates: dict[str, float | None] = field(default_factory=dict)
    picked: set[str] = field(default_factory=set)  # victims evicted or shrunk
    book: ReservationBook = field(default_factory=ReservationBook)
    # Accelerators with a job left waiting for capacity (not quota): no elastic growth there.
    waiting: set[str] = field(default_factory=set)
    # Behind a strict-FIFO head, or full (without explanations): every later job waits.
    blocked: set[str] = field(default_factory=set)

    @property
    def reason(self) -> str | None:
        """The reason of the job being considered."""
        return self.reasons[self.at]

    @reason.setter
    def reason(self, reason: str | None) -> None:
        self.reasons[self.at] = reason


@dataclass(slots=True)
class Memo:
    """Answers the cycle found, each field with what makes it stale (`memo.Until`)."""

    generation: int = 0  # the working state's, moved by `invalidate`
    # Fits that failed, by the generation they failed in.
    misses: dict[FitKey, int] = field(default_factory=dict, metadata=stale_when(Until.STATE))
    # `backfill.earliest_start` answers by (accelerator, size, level, topology-aware), with the
    # generation they were found in and the time their sweep stopped at (`Reclaimer.earliest`).
    earliest: dict[tuple[str, int, str, bool], tuple[int, EarliestStart | None, float]] = field(
        default_factory=dict, metadata=stale_when(Until.STATE)
    )
    fruitless: dict[SearchKey, Fruitless] = field(default_factory=dict, metadata=stale_when(Until.STATE))
    walks: dict[SearchKey, Walked] = field(default_factory=dict, metadata=stale_when(Until.STATE))
    # The generation in which jobs of a key could not preempt (`_Cycle._passed_over`).
    cannot_preempt: dict[PreemptorKey, int] = field(default_factory=dict, metadata=stale_when(Until.STATE))
    verdicts: dict[VerdictKey, Verdict] = field(default_factory=dict, metadata=stale_when(Until.STATE))
    backfill_misses: dict[FitKey, BackfillMiss] = field(default_factory=dict, metadata=stale_when(Until.STATE))
    admissions: dict[AdmissionKey, CachedAdmission] = field(
        default_factory=dict, metadata=stale_when(Until.LEDGER_OR_FREE)
    )
    # Whether a team uses less than its guarantee on an accelerator (`Reclaimer.owed`), with the
    # ledger's version it was found at, by (team, accelerator).
    owed: dict[tuple[str, str], tuple[int, bool]] = field(default_factory=dict, metadata=stale_when(Until.LEDGER))
    # Victim candidates per accelerator, built on its first preemption attempt.
    candidates: dict[str, Victims] = field(default_factory=dict, metadata=stale_when(Until.CYCLE))
    # Accelerators where no job left in the pass may take anything (priorities only fall along it).
    victimless: set[str] = field(default_factory=set, metadata=stale_when(Until.PASS))
    # Accelerators with no preemption or reservation attempt left (`_Cycle._settled`).
    settled: set[str] = field(default_factory=set, metadata=stale_when(Until.PASS))

    def invalidate(self) -> None:
        """The working state changed: every answer found so far may be wrong now."""
        self.generation += 1

    def new_pass(self) -> None:
        """A pass over jobs of higher priority than the last one's lowest begins (the borrowers'
        after the owners' of every class): what held only for the priorities seen so far
        (`victimless`, and what it settled) is dropped."""
        for name in _PER_PASS:
            getattr(self, name).clear()


_PER_PASS = fields_until(Memo, Until.PASS)


@dataclass(slots=True)
class Budgets:
    """What bounds the cycle's work. Each only ever runs out."""

    scan_budget: int  # victim candidates searches may still look at
    reservation_cap: int  # reservation attempts per accelerator
    preemption_attempts: int = 0
    reservation_attempts: dict[str, int] = field(default_factory=dict)
    reservations_made: dict[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, policy: Policy) -> Budgets:
        depth = policy.reservation_depth
        cap = depth + EXTRA_RESERVATION_ATTEMPTS if depth > 0 else 0
        return cls(policy.preemption_scan_budget, cap)


class Statement:
    """Tentative changes to the working state, committed or discarded as one (Volcano's Statement).

    Each change is made at once and its undo recorded; `discard` undoes them newest first, `commit`
    keeps them. As a context manager, whatever is still recorded when the body ends is discarded,
    on an early return or an exception as well."""

    __slots__ = ("_undo",)

    def __init__(self) -> None:
        self._undo: list[Callable[[], None]] = []

    def do(self, change: Callable[[], None], undo: Callable[[], None]) -> None:
        change()
        self._undo.append(undo)

    def commit(self) -> None:
        self._undo.clear()

    def discard(self) -> None:
        while self._undo:
            self._undo.pop()()

    def __enter__(self) -> Statement:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.discard()
