"""Kueue-like quota admission per accelerator type.

A team may always use up to its `guaranteed` GPUs. Beyond that it borrows, up to
`guaranteed + borrow_limit`, from the idle capacity of its cohort (its department) and then of
the fleet. The lendable pool of an accelerator is the capacity nobody is guaranteed plus, for
every team, the unused part of its guarantee capped by its `lend_limit`. Because the pool is
shared, "cohort first, then fleet" decides whose idle capacity a loan is charged to, never whether
a loan is admitted, so admission checks the pooled total: total borrowed + new loan <= pool.

Teams without a quota row for an accelerator have no guarantee there and an unlimited borrow
limit: they run on idle capacity only and are always reclaimable by teams with guarantees.

The pool is checked at every admission, not only at loans: a team starting within its guarantee
shrinks what its unused guarantee lends, so when the loans outstanding would then exceed the
pool, the borrowers are reclaimed first (the admission is refused as "capacity"). Loans already
beyond the pool as the cycle begins (the fleet shrank, or lend limits were lowered under them) are
backed by no team's guarantee: they never keep a team from its guarantee.

Work nobody may preempt ("pinned") could never be reclaimed from: beyond its team's guarantee it
may only use capacity nobody is guaranteed, together with the other pinned work doing so.

With `Policy.quota_hold_after_s`, a team's quota is reserved as nodes are: the first of its jobs
on an accelerator that waits in a cycle, for its limit or for capacity, having waited that long,
keeps its size within the team's limit, and the team's later jobs are admitted only within the
limit less that size, never less than the guarantee (`QuotaLedger.hold`). Without, the team's
smaller jobs take whatever its quota has left, and a large job waits until the team's load
happens to leave it room. What the team leaves idle meanwhile is lent to other teams. A job
larger than its team's limit keeps nothing.

The rules (each one function or method below, cited by name where it is read; `docs/engine.md`,
"The rules", lists them with where they live):

- "guarantee": a team may always use up to its guarantee (`within_guarantee`);
- "borrow limit": never beyond guarantee + borrow limit, nor beyond a hold (`QuotaLedger.admit`);
- "lendable pool": loans stay within the pool, checked at every admission (`QuotaLedger.admit`,
  `QuotaLedger.refusal` says why not);
- "pinned on unguaranteed": work nobody may preempt borrows only what nobody is guaranteed
  (`QuotaLedger.admit`);
- "reclaim share": a job reclaims loans when at least `Policy.reclaim_guaranteed_share` of it lies
  within what is left of its team's guarantee (`reclaims_loans`);
- "loans only": a team another team takes from keeps its guarantee (`spare_beyond_guarantee`);
- "quota hold": a team's first long-waiting job keeps its size within the limit (`QuotaLedger.hold`);
- "share of a lender": with `Policy.max_share_of_lender`, a team takes at most that share of
  another team's lent GPUs: a loan is admitted only if every loan can then be charged to lenders
  within the shares (`loans_within_shares`, in `QuotaLedger.admit`);
- who lent what to whom: `QuotaLedger.loans` charges every loan to a lender (`charge_loans`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from .model import Job, Policy, Quota, Running, Team
from .plan import REASON_CAPACITY, REASON_GUARANTEE, REASON_QUOTA


@dataclass(frozen=True, slots=True)
class Admission:
    borrowing: bool
    within_guarantee: bool


_OWN = Admission(borrowing=False, within_guarantee=True)
_BORROWED = Admission(borrowing=True, within_guarantee=False)


# The name under which `QuotaLedger.loans` records what is lent of the capacity nobody is guaranteed,
# and what the pool could not cover (loans beyond it, after the fleet shrank).
UNGUARANTEED = "(unguaranteed)"
BEYOND_POOL = "(beyond the pool)"


def within_guarantee(used: int, gpus: int, guaranteed: int) -> bool:
    """Rule "guarantee": `gpus` more GPUs keep a team that uses `used` within its `guaranteed`
    GPUs, which it may always use (reclaiming loans for them when they are lent out)."""
    return used + gpus <= guaranteed


def reclaims_loans(guarantee_left: int, gpus: int, share: float) -> bool:
    """Rule "reclaim share": a job of `gpus` GPUs may reclaim loans when its team has guarantee
    left (`guarantee_left` > 0), at least `share` (`Policy.reclaim_guaranteed_share`) of its size
    (1: the whole job fits within it, "guarantee")."""
    return guarantee_left > 0 and guarantee_left >= share * gpus


def spare_beyond_guarantee(used: int, leaving: int, guaranteed: int) -> int:
    """Rule "loans only": how many GPUs another team may take from a team that uses `used`, once
    its `leaving` GPUs are gone: only what lies beyond its `guaranteed` GPUs (a reclaim takes only
    real loans; negative: the team would be below its guarantee already)."""
    return used - leaving - guaranteed


def charge_loans(
    borrowed: dict[str, int], lent: dict[str, float], unguaranteed: float, share: float = 1.0
) -> dict[tuple[str, str], int]:
    """Who lent what to whom: each borrower's loans (`borrowed`, GPUs beyond its guarantee per team)
    charged to the lenders (`lent`: what each team's unused guarantee lends), no borrower more than
    `share` of a lender's lent GPUs, then to the capacity nobody is guaranteed (`UNGUARANTEED`,
    which no share bounds); what neither covers is `BEYOND_POOL`. (lender, borrower) -> GPUs.

    Each lender in turn (by name) gives its GPUs one at a time to the borrower with the most left
    to cover (then by name) that has not yet had its share of it: spreading each lender over the
    largest loans leaves the loans as even as can be for the lenders after it, so everything is
    covered whenever any charging within the shares could cover it (`loans_within_shares`)."""
    left = {team: gpus for team, gpus in borrowed.items() if gpus > 0}
    charged: dict[tuple[str, str], int] = {}
    for lender in sorted(lent):
        supply = math.floor(lent[lender])
        cap = math.floor(share * lent[lender])
        given: dict[str, int] = {}
        while supply > 0:
            open_ = [team for team, gpus in left.items() if gpus > 0 and team != lender and given.get(team, 0) < cap]
            if not open_:
                break
            team = min(open_, key=lambda name: (-left[name], name))
            given[team] = given.get(team, 0) + 1
            left[team] -= 1
            supply -= 1
        for team, gpus in given.items():
            charged[(lender, team)] = gpus
    spare = math.floor(unguaranteed)
    for team in sorted(left):
        covered = min(spare, left[team])
        spare -= covered
        if covered:
            charged[(UNGUARANTEED, team)] = covered
        if left[team] > covered:
            charged[(BEYOND_POOL, team)] = left[team] - covered
    return charged


def loans_within_shares(borrowed: list[int], lent: list[float], unguaranteed: float, share: float) -> bool:
    """Rule "share of a lender": whether the loans `borrowed` (GPUs per borrower) can all be charged
    to the lenders (`lent`: what each lends), no borrower more than `share` of a lender's lent GPUs,
    and to the capacity nobody is guaranteed, which no share bounds (`charge_loans` then charges
    them so). They can exactly when no group of borrowers needs more than that capacity plus, of
    each lender, its lent GPUs or the group's shares of them, whichever is less (a max-flow cut);
    of the groups of k borrowers, the k largest need the most."""
    loans = sorted((gpus for gpus in borrowed if gpus > 0), reverse=True)
    supplies = [(math.floor(gpus), math.floor(share * gpus)) for gpus in lent if gpus > 0]
    need = 0
    for size, gpus in enumerate(loans, start=1):
        need += gpus
        if need > math.floor(unguaranteed) + sum(min(supply, size * cap) for supply, cap in supplies):
            return False
    return True


def borrowed_gpus(held: int, guaranteed: int) -> int:
    """What a team borrows of an accelerator while it holds `held` GPUs of it: those beyond its
    guarantee (none below it, whatever its runs were admitted as). The ledger books this, summed
    over time (`scheduling.cycle.borrowed`), and /metrics shows it (`fleetline_gpus_borrowed`)."""
    return max(0, held - guaranteed)


@dataclass(slots=True)
class _Account:
    guaranteed: int
    limit: float
    lend_cap: float
    used: int = 0
    # While the team's first waiting job of the cycle keeps its size within the limit (`hold`):
    # the limit less that size, the most its other work is admitted to (inf: no such hold).
    cap: float = math.inf

    def lendable(self) -> float:
        return min(self.lend_cap, max(0, self.guaranteed - self.used))

    def borrowed(self) -> int:
        return borrowed_gpus(self.used, self.guaranteed)

    def beyond(self, gpus: int) -> int:
        """How many of `gpus` more GPUs would lie beyond the guarantee."""
        return self.used + gpus - max(self.used, self.guaranteed) if self.used + gpus > self.guaranteed else 0


class _AcceleratorLedger:
    __slots__ = (
        "accounts",
        "pool",
        "borrowed",
        "unguaranteed",
        "pinned",
        "capacity",
        "most_lendable",
        "guarantees",
        "overdrawn",
    )

    def __init__(self, capacity: int, quotas: list[Quota]) -> None:
        self.capacity = capacity
        self.accounts: dict[str, _Account] = {}
        for quota in quotas:
            lend_cap = math.inf if quota.lend_limit is None else max(0, quota.lend_limit)
            self.accounts[quota.team] = _Account(
                max(0, quota.guaranteed), max(0, quota.guaranteed) + max(0, quota.borrow_limit), lend_cap
            )
        guaranteed_total = sum(account.guaranteed for account in self.accounts.values())
        # Whether some team is guaranteed GPUs here: accounts made later (`account`) guarantee none.
        self.guarantees = guaranteed_total > 0
        self.unguaranteed = max(0, capacity - guaranteed_total)
        self.pool = self.unguaranteed + sum(account.lendable() for account in self.accounts.values())
        # The pool when no guarantee is in use: the most that could ever be lent.
        self.most_lendable = self.unguaranteed + sum(
            min(account.lend_cap, account.guaranteed) for account in self.accounts.values()
        )
        self.borrowed = 0
        # GPUs of work nobody may preempt running beyond its teams' guarantees.
        self.pinned = 0
        # Loans beyond the pool as the cycle began (the fleet shrank, or lend limits were lowered
        # under them): no team's unused guarantee backs them (`QuotaLedger.admit`).
        self.overdrawn = 0

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

    __slots__ = ("ledgers", "department", "version", "releases", "holders", "holds", "hold_after_s", "share")

    def __init__(
        self,
        quotas: Iterable[Quota],
        teams: Iterable[Team],
        running: Iterable[Running],
        capacity: dict[str, int],
        *,
        usage: dict[tuple[str, str], int] | None = None,
        pinned: dict[tuple[str, str], int] | None = None,
        policy: Policy | None = None,
    ) -> None:
        """`usage` (GPUs per (team, accelerator)), when given, replaces summing `running`; `pinned`
        then gives the GPUs of borrowing work nobody may preempt per (team, accelerator). The
        quota settings of `policy` (default: `Policy()`'s) apply: with `Policy.quota_hold_after_s`,
        a team's first waiting job that has waited that long keeps its size within the team's
        limit (`hold`)."""
        hold_after_s = (policy or _DEFAULTS).quota_hold_after_s
        # "share of a lender" (`Policy.max_share_of_lender`; 1: no bound but the pool's).
        share = (policy or _DEFAULTS).max_share_of_lender
        self.share = 1.0 if share is None else share
        by_accelerator: dict[str, list[Quota]] = {}
        for quota in quotas:
            by_accelerator.setdefault(quota.accelerator, []).append(quota)
        self.ledgers: dict[str, _AcceleratorLedger] = {
            accelerator: _AcceleratorLedger(capacity.get(accelerator, 0), by_accelerator.get(accelerator, []))
            for accelerator in sorted(set(capacity) | set(by_accelerator))
        }
        self.department = {team.id: team.department for team in teams}
        # Bumped on every charge or release, so callers can cache admissions between changes; and on
        # every release (the only change that gives a team guarantee back).
        self.version = self.releases = 0
        # (team, accelerator) -> the team's first job that waits this cycle there (`hold`).
        self.holders: dict[tuple[str, str], str] = {}
        self.hold_after_s = math.inf if hold_after_s is None else hold_after_s
        # (only where some team's limit lies within its accelerator's capacity can a hold matter)
        self.holds = hold_after_s is not None and any(
            account.limit < ledger.capacity for ledger in self.ledgers.values() for account in ledger.accounts.values()
        )
        if usage is None:
            usage, pinned = {}, {}
            for run in running:
                key = (run.job.team, run.job.accelerator)
                gpus = sum(gpus for _, gpus in run.allocation)
                usage[key] = usage.get(key, 0) + gpus
                if run.borrowing and not run.job.preemptible and run.grace_until_s is None:
                    pinned[key] = pinned.get(key, 0) + gpus
        for (team, accelerator), gpus in sorted(usage.items()):
            self.charge(team, accelerator, gpus)
        for (team, accelerator), gpus in sorted((pinned or {}).items()):
            # Only the part beyond the team's guarantee is pinned on unguaranteed capacity.
            ledger = self._ledger(accelerator)
            ledger.pinned += min(gpus, ledger.account(team).borrowed())
        for ledger in self.ledgers.values():
            ledger.overdrawn = max(0, math.ceil(ledger.borrowed - ledger.pool))

    def loans(self, accelerator: str) -> dict[tuple[str, str], int]:
        """Who lent what to whom of `accelerator` now: (lender, borrower) -> GPUs (`charge_loans`;
        a lender is a team, `UNGUARANTEED` or `BEYOND_POOL`). Each borrower's loans add up to what
        it uses beyond its guarantee."""
        ledger = self._ledger(accelerator)
        borrowed = {team: account.borrowed() for team, account in ledger.accounts.items()}
        lent = {team: account.lendable() for team, account in ledger.accounts.items() if account.lendable() > 0}
        return charge_loans(borrowed, lent, ledger.unguaranteed, self.share)

    def _within_shares(self, ledger: _AcceleratorLedger, team: str, new_used: int) -> bool:
        """Rule "share of a lender" (`loans_within_shares`) once `team` uses `new_used` GPUs (beyond
        its guarantee, so it lends nothing)."""
        borrowed, lent = [], []
        for name, account in ledger.accounts.items():
            if name == team:
                borrowed.append(borrowed_gpus(new_used, account.guaranteed))
            else:
                borrowed.append(account.borrowed())
                lent.append(account.lendable())
        return loans_within_shares(borrowed, lent, ledger.unguaranteed, self.share)

    def any_guarantee(self, accelerator: str) -> bool:
        """Whether some team is guaranteed GPUs of `accelerator`: only then can a job reclaim them."""
        return self._ledger(accelerator).guarantees

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

    def borrowed(self, team: str, accelerator: str) -> int:
        """GPUs `team` uses beyond its guarantee of `accelerator`."""
        return self._ledger(accelerator).account(team).borrowed()

    def unused_guarantee(self, team: str, accelerator: str) -> int:
        """`team`'s guarantee of `accelerator` less what it uses: negative when it borrows (no
        account is made for a team without one: 0)."""
        ledger = self.ledgers.get(accelerator)
        account = None if ledger is None else ledger.accounts.get(team)
        return 0 if account is None else account.guaranteed - account.used

    def guarantee_left(self, team: str, accelerator: str) -> int:
        """GPUs of its guarantee of `accelerator` that `team` does not use."""
        return max(0, self.unused_guarantee(team, accelerator))

    def below_guarantee(self, team: str, accelerator: str) -> bool:
        """Whether `team` uses fewer GPUs of `accelerator` than it is guaranteed (rule "guarantee":
        it may still start work that reclaims loans)."""
        return self.unused_guarantee(team, accelerator) > 0

    def spare(self, team: str, accelerator: str, leaving: int) -> int:
        """Rule "loans only" (`spare_beyond_guarantee`): how many of `team`'s GPUs of `accelerator`
        another team may take, once its `leaving` GPUs are gone."""
        account = self._ledger(accelerator).account(team)
        return spare_beyond_guarantee(account.used, leaving, account.guaranteed)

    def borrowers_rank(self, job: Job) -> tuple[int, float]:
        """Where `job` goes among the jobs that would borrow, with `Policy.least_borrowed_first`:
        first the teams that borrow the fewest GPUs of its accelerator (a team below its guarantee
        borrows none), then, among equals, the larger share of its size within what is left of its
        team's guarantee (its plain definition; the queue scan looks each team up once)."""
        return borrowers_rank(
            self.borrowed(job.team, job.accelerator), self.guarantee_left(job.team, job.accelerator), job.gpus
        )

    def limit(self, team: str, accelerator: str) -> float:
        return self._ledger(accelerator).account(team).limit

    def within_guarantee(self, team: str, accelerator: str, gpus: int) -> bool:
        """Rule "guarantee" (`within_guarantee`): whether `gpus` more GPUs keep `team` within its
        guarantee (so it may reclaim them)."""
        account = self._ledger(accelerator).account(team)
        return within_guarantee(account.used, gpus, account.guaranteed)

    def reclaims(self, team: str, accelerator: str, gpus: int, share: float) -> bool:
        """Rule "reclaim share" (`reclaims_loans`): whether a job of `gpus` GPUs of `team` may
        reclaim loans: its team has guarantee left, at least `share` of the job's size."""
        account = self._ledger(accelerator).account(team)
        return reclaims_loans(account.guaranteed - account.used, gpus, share)

    def admit(self, team: str, accelerator: str, gpus: int, pinned: bool = False) -> Admission | None:
        """Whether `team` may start `gpus` more GPUs of `accelerator` now (of work nobody may
        preempt, when `pinned`); None when it may not (see `refusal` for why). The home of the
        rules "borrow limit", "lendable pool" and "pinned on unguaranteed"; within the guarantee
        ("guarantee", `within_guarantee` inlined), the pool still decides."""
        ledger = self._ledger(accelerator)
        account = ledger.account(team)
        new_used = account.used + gpus
        if new_used > account.cap:  # "quota hold"
            return None
        lendable = account.lendable()
        if new_used <= account.guaranteed:
            # The team's own GPUs, unless they are lent out: what its unused guarantee still lends
            # afterwards must cover the loans outstanding that the pool backed as the cycle began.
            # Loans beyond the pool then (`overdrawn`) are backed by no guarantee: a guarantee is a
            # promise, so they never keep a team from it; it reclaims only the loans it backs.
            backed = ledger.borrowed - ledger.overdrawn
            if backed > ledger.pool - lendable + min(account.lend_cap, account.guaranteed - new_used):
                return None
            return _OWN
        if new_used > account.limit:  # "borrow limit"
            return None
        extra = new_used - max(account.used, account.guaranteed)
        # "lendable pool": the team's own unused guarantee is in the pool but is not a loan to itself
        # (`short_of_pool`, stated here in the pool's terms).
        if ledger.borrowed + extra > ledger.pool - lendable:
            return None
        if pinned and _short_of_unguaranteed(ledger, extra) > 0:  # "pinned on unguaranteed"
            return None
        if self.share < 1.0 and not self._within_shares(ledger, team, new_used):
            return None
        return _BORROWED

    def short_of_limit(self, team: str, accelerator: str, gpus: int) -> int:
        """Rule "borrow limit": how many GPUs beyond its guarantee plus borrow limit `team` would
        hold with `gpus` more (0: within it)."""
        account = self._ledger(accelerator).accounts.get(team)
        if account is None or account.limit == math.inf:
            return 0
        return max(0, math.ceil(account.used + gpus - account.limit))

    def short_of_pool(self, team: str, accelerator: str, gpus: int) -> int:
        """Rule "lendable pool": how many of the GPUs `team` would borrow with `gpus` more (those
        beyond its guarantee) other teams could not lend it now (`lendable_to`; 0: the pool lends
        them all). `admit` refuses a loan exactly when this is above 0."""
        ledger = self._ledger(accelerator)
        account = ledger.accounts.get(team)
        beyond = gpus if account is None else account.beyond(gpus)
        return max(0, beyond - self.lendable_to(team, accelerator))

    def short_of_unguaranteed(self, team: str, accelerator: str, gpus: int) -> int:
        """Rule "pinned on unguaranteed": how many GPUs beyond those nobody is guaranteed work nobody
        may preempt would hold with `gpus` more of `team`'s (those beyond its guarantee; 0: none)."""
        ledger = self._ledger(accelerator)
        account = ledger.accounts.get(team)
        return _short_of_unguaranteed(ledger, gpus if account is None else account.beyond(gpus))

    def room(self, team: str, accelerator: str, most: int, pinned: bool = False) -> int:
        """The most GPUs, up to `most`, that `admit` lets `team` start now (0: none). Admission
        is monotone in the size, so this is a binary search."""
        low, high = 0, most
        while low < high:
            middle = (low + high + 1) // 2
            if self.admit(team, accelerator, middle, pinned) is None:
                high = middle - 1
            else:
                low = middle
        return low

    def refusal(self, team: str, accelerator: str, gpus: int, free_gpus: int, pinned: bool = False) -> str:
        """Why `admit` said no: "quota" (the team's limit, or a loan bigger than the pool could ever
        lend it, or idle GPUs that are not lendable, or beyond its shares of the lenders),
        "guarantee" (work nobody may
        preempt, beyond the guarantee, with no unguaranteed capacity left) or "capacity" (other
        teams' loans hold the pool: reclaiming or waiting for them helps)."""
        ledger = self._ledger(accelerator)
        account = ledger.account(team)
        if account.used + gpus > account.limit or account.used + gpus > account.cap:
            return REASON_QUOTA
        if account.used + gpus <= account.guaranteed:
            return REASON_CAPACITY
        extra = account.beyond(gpus)
        if pinned and _short_of_unguaranteed(ledger, extra) > 0:
            return REASON_GUARANTEE
        if ledger.borrowed + extra <= ledger.pool - account.lendable():
            return REASON_QUOTA  # the pool lends it: only "share of a lender" refuses
        # Even alone on an idle fleet, the team could not borrow that much (lend limits); or idle GPUs
        # are there but not lendable.
        never = account.guaranteed + ledger.most_lendable - min(account.lend_cap, account.guaranteed)
        if (never < gpus <= ledger.capacity) or free_gpus >= gpus:
            return REASON_QUOTA
        return REASON_CAPACITY

    def hold(self, team: str, accelerator: str, gpus: int, job_id: str, waited_s: float) -> bool:
        """`job_id`, of `gpus` GPUs (its smallest size), waits, having waited `waited_s`: if it is
        the first of `team`'s jobs on `accelerator` to wait this cycle that has waited
        `hold_after_s`, it keeps its size within the team's limit, as a reservation keeps nodes
        for the first blocked job. The team's other work is then admitted only within the limit
        less that size, but always within the team's guarantee, so what the team's running work
        frees beyond its guarantee goes to the job first; the GPUs the team leaves idle go to other
        teams' loans. Nothing is kept for a job larger than the limit, nor
        where the limit lies beyond the accelerator's capacity (it never refuses anything there).
        True when it lowered what the team may be admitted to."""
        key = (team, accelerator)
        if not self.holds or key in self.holders or waited_s < self.hold_after_s:
            return False
        ledger = self._ledger(accelerator)
        account = ledger.account(team)
        if gpus > account.limit or account.limit >= ledger.capacity:
            return False
        self.holders[key] = job_id
        account.cap = max(account.limit - gpus, account.guaranteed)
        self.version += 1
        return True

    def held_ahead(self, team: str, accelerator: str, job_id: str) -> float:
        """The GPUs `team`'s limit keeps for a waiting job other than `job_id` (`hold`)."""
        account = self._ledger(accelerator).account(team)
        holder = self.holders.get((team, accelerator))
        return 0.0 if holder is None or holder == job_id or account.cap == math.inf else account.limit - account.cap

    def lendable_to(self, team: str, accelerator: str) -> int:
        """The GPUs of `accelerator` that other teams could lend `team` now: the pool less the loans
        outstanding, less the team's own unused guarantee (no loan to itself), as `admit` reads it."""
        ledger = self._ledger(accelerator)
        account = ledger.accounts.get(team)
        own = 0.0 if account is None else account.lendable()
        return max(0, math.floor(ledger.pool - own - ledger.borrowed))

    def unguaranteed(self, accelerator: str) -> tuple[int, int]:
        """The GPUs of `accelerator` nobody is guaranteed, and those that work nobody may preempt
        holds of them (beyond its teams' guarantees)."""
        ledger = self._ledger(accelerator)
        return ledger.unguaranteed, ledger.pinned

    def kept_for(self, team: str, accelerator: str) -> tuple[str, float] | None:
        """The team's job whose size its limit keeps (`hold`), and the most its other work may hold."""
        holder = self.holders.get((team, accelerator))
        account = self._ledger(accelerator).accounts.get(team)
        if holder is None or account is None or account.cap == math.inf:
            return None
        return holder, account.cap

    def charge(self, team: str, accelerator: str, gpus: int, pinned: bool = False) -> None:
        """Charge `gpus` started GPUs to `team` (of work nobody may preempt, when `pinned`)."""
        self.version += 1
        ledger = self._ledger(accelerator)
        if pinned:
            ledger.pinned += ledger.account(team).beyond(gpus)
        ledger.change(team, gpus)

    def release(self, team: str, accelerator: str, gpus: int) -> None:
        self.version += 1
        self.releases += 1
        self._ledger(accelerator).change(team, -gpus)


def _short_of_unguaranteed(ledger: _AcceleratorLedger, beyond: int) -> int:
    """Rule "pinned on unguaranteed" for `beyond` more GPUs of pinned work beyond its team's
    guarantee: how many of them the GPUs nobody is guaranteed cannot hold beside the pinned work
    already there (0: all, or none beyond the guarantee)."""
    return max(0, ledger.pinned + beyond - ledger.unguaranteed) if beyond > 0 else 0


def borrowers_rank(borrowed: int, guarantee_left: int, gpus: int) -> tuple[int, float]:
    """`QuotaLedger.borrowers_rank` from its parts: fewest GPUs borrowed by the team first, then the
    largest share of the job's `gpus` within its team's `guarantee_left`. A gang that is mostly
    owed goes before one of a team with a sliver of guarantee left: the unmet guarantee counts for
    as long as either waits, and a smaller gang collects its GPUs sooner."""
    return borrowed, -guarantee_left / gpus if gpus > 0 else 0.0


_DEFAULTS = Policy()  # the quota settings of a ledger made without a policy
