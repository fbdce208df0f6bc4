"""Kueue-like quota admission per accelerator type.

A team may always use up to its `guaranteed` GPUs. Beyond that it borrows, up to
`guaranteed + borrow_limit`, from the idle capacity of its cohort (its department) and then of
the fleet. The lendable pool of an accelerator is the capacity nobody is guaranteed plus, for
every team, the unused part of its guarantee capped by its `lend_limit`. Because the pool is
shared, "cohort first, then fleet" decides whose idle capacity a loan is charged to, never whether
a loan is admitted, so admission checks the pooled total: total borrowed + new loan <= pool.

Teams without a quota row for an accelerator have no guarantee there and an unlimited borrow
limit: they run on idle capacity only and are always reclaimable by teams with guarantees.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from .model import Quota, Running, Team


@dataclass(frozen=True, slots=True)
class Admission:
    borrowing: bool
    within_guarantee: bool


_OWN = Admission(borrowing=False, within_guarantee=True)
_BORROWED = Admission(borrowing=True, within_guarantee=False)


@dataclass(slots=True)
class _Account:
    guaranteed: int
    limit: float
    lend_cap: float
    used: int = 0

    def lendable(self) -> float:
        return min(self.lend_cap, max(0, self.guaranteed - self.used))

    def borrowed(self) -> int:
        return max(0, self.used - self.guaranteed)


class _AcceleratorLedger:
    __slots__ = ("accounts", "pool", "borrowed", "unguaranteed")

    def __init__(self, capacity: int, quotas: list[Quota]) -> None:
        self.accounts: dict[str, _Account] = {}
        for quota in quotas:
            lend_cap = math.inf if quota.lend_limit is None else max(0, quota.lend_limit)
            self.accounts[quota.team] = _Account(
                max(0, quota.guaranteed), max(0, quota.guaranteed) + max(0, quota.borrow_limit), lend_cap
            )
        guaranteed_total = sum(account.guaranteed for account in self.accounts.values())
        self.unguaranteed = max(0, capacity - guaranteed_total)
        self.pool = self.unguaranteed + sum(account.lendable() for account in self.accounts.values())
        self.borrowed = 0

    def account(self, team: str) -> _Account:
        account = self.accounts.get(team)
        if account is None:
            account = self.accounts[team] = _Account(0, math.inf, 0.0)
        return account

    def change(self, team: str, delta: int) -> None:
        account = self.account(team)
        self.pool -= account.lendable()
        self.borrowed -= account.borrowed()
        account.used += delta
        self.pool += account.lendable()
        self.borrowed += account.borrowed()


class QuotaLedger:
    """Per-accelerator GPU usage by team, charged as the cycle starts jobs."""

    __slots__ = ("ledgers", "department", "version")

    def __init__(
        self,
        quotas: Iterable[Quota],
        teams: Iterable[Team],
        running: Iterable[Running],
        capacity: dict[str, int],
        *,
        usage: dict[tuple[str, str], int] | None = None,
    ) -> None:
        """`usage` (GPUs per (team, accelerator)), when given, replaces summing `running`."""
        by_accelerator: dict[str, list[Quota]] = {}
        for quota in quotas:
            by_accelerator.setdefault(quota.accelerator, []).append(quota)
        self.ledgers: dict[str, _AcceleratorLedger] = {
            accelerator: _AcceleratorLedger(capacity.get(accelerator, 0), by_accelerator.get(accelerator, []))
            for accelerator in sorted(set(capacity) | set(by_accelerator))
        }
        self.department = {team.id: team.department for team in teams}
        # Bumped on every charge or release, so callers can cache admissions between changes.
        self.version = 0
        if usage is None:
            usage = {}
            for run in running:
                key = (run.job.team, run.job.accelerator)
                usage[key] = usage.get(key, 0) + sum(gpus for _, gpus in run.allocation)
        for (team, accelerator), gpus in sorted(usage.items()):
            self.charge(team, accelerator, gpus)

    def any_guarantee(self, accelerator: str) -> bool:
        """Whether some team is guaranteed GPUs of `accelerator`: only then can a job reclaim them."""
        return any(account.guaranteed for account in self._ledger(accelerator).accounts.values())

    def any_headroom(self) -> bool:
        """Whether some team uses fewer GPUs than it is guaranteed (of any accelerator): only then
        can a job be admitted within its guarantee. Usage only grows within a cycle."""
        accounts = (account for ledger in self.ledgers.values() for account in ledger.accounts.values())
        return any(account.used < account.guaranteed for account in accounts)

    def _ledger(self, accelerator: str) -> _AcceleratorLedger:
        ledger = self.ledgers.get(accelerator)
        if ledger is None:
            ledger = self.ledgers[accelerator] = _AcceleratorLedger(0, [])
        return ledger

    def used(self, team: str, accelerator: str) -> int:
        return self._ledger(accelerator).account(team).used

    def guaranteed(self, team: str, accelerator: str) -> int:
        return self._ledger(accelerator).account(team).guaranteed

    def limit(self, team: str, accelerator: str) -> float:
        return self._ledger(accelerator).account(team).limit

    def admit(self, team: str, accelerator: str, gpus: int) -> Admission | None:
        """Whether `team` may start `gpus` more GPUs of `accelerator` now; None means quota."""
        ledger = self._ledger(accelerator)
        account = ledger.account(team)
        new_used = account.used + gpus
        if new_used <= account.guaranteed:
            return _OWN
        if new_used > account.limit:
            return None
        extra = new_used - max(account.used, account.guaranteed)
        # The team's own unused guarantee is in the pool but is not a loan to itself.
        if ledger.borrowed + extra > ledger.pool - account.lendable():
            return None
        return _BORROWED

    def refusal(self, team: str, accelerator: str, gpus: int, free_gpus: int) -> str:
        """Why `admit` said no: "quota" (the team's limit, or idle GPUs that are not lendable),
        or "capacity" (the lendable pool is short only because the fleet is busy)."""
        account = self._ledger(accelerator).account(team)
        if account.used + gpus > account.limit or free_gpus >= gpus:
            return "quota"
        return "capacity"

    def charge(self, team: str, accelerator: str, gpus: int) -> None:
        self.version += 1
        self._ledger(accelerator).change(team, gpus)

    def release(self, team: str, accelerator: str, gpus: int) -> None:
        self.version += 1
        self._ledger(accelerator).change(team, -gpus)
