"""The chargeback report: GPU-hours, cost and budget per team over a period of whole fleet
calendar days, read from the per-job ledger (``scheduling.models.JobUsage``, one row per job and
day) and the fleet ledger (``FleetSample``). The page, the exports and the API all call
``finance_report``; a closed month answers from its stored snapshot instead.

Definitions (every figure is GPU-hours unless it says otherwise):

- used: allocated GPU-hours (a job held the GPUs); useful + lost = used.
- lost, by why: restore (held before the work resumed: handover and checkpoint read-back),
  topology (the slowdown of a spread placement), rolled back by evictions (preemptions, drains,
  requeues) and rolled back by failures (dead, degraded or slow nodes); unsplit is what ledger
  rows written before the split hold, so the five always sum to lost.
- borrowed: the part of used that ran on borrowed quota, beyond the team's guarantee.
- guarantee: the team's guaranteed GPUs x the hours of the period that the fleet has run.
- utilisation of the guarantee: (used - borrowed) / guarantee.
- cost, by ``FleetPolicy.charge_model``: usage = used x rate; guarantee = guarantee x rate +
  borrowed x rate. The rate is the accelerator type's price on each day; cost is rounded to
  the cent per team and the totals are the sums of the rounded rows.
- budget: the team's monthly budget, pro rata by days for a period that is not one month.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import date, timedelta
from decimal import ROUND_HALF_UP, Decimal
from typing import Any, Protocol

from django.conf import settings
from django.contrib.auth.models import AnonymousUser, User
from django.db.models import F, Sum
from django.http import Http404

from finance.models import Budget, MonthClose, Rate
from scheduling.fleet_calendar import FleetPeriod, fleet_epoch, fleet_period, month_bounds
from scheduling.models import FleetClock, FleetSample, JobUsage
from tenants.models import FleetPolicy, Membership, Quota, Team
from tenants.permissions import is_finance, is_fleet_admin

AnyUser = User | AnonymousUser
CENT = Decimal("0.01")
# The totals row's budget: the sum of the money budgets, not compared with the total spend.
TOTAL_BUDGETS = "total"
ZERO = Decimal("0")


def money(value: Decimal) -> Decimal:
    return value.quantize(CENT, rounding=ROUND_HALF_UP)


@dataclass(frozen=True, slots=True)
class TeamRow:
    team_id: int
    team: str
    department: str
    guarantee_gpu_h: float
    used_gpu_h: float
    useful_gpu_h: float
    lost_gpu_h: float
    borrowed_gpu_h: float
    serving_gpu_h: float
    training_gpu_h: float
    batch_gpu_h: float
    cost: Decimal
    budget: Decimal | None = None
    budget_unit: str = ""
    # Lost split by why (a month closed before the split has zeros here: all of it unsplit).
    lost_restore_gpu_h: float = 0.0
    lost_topology_gpu_h: float = 0.0
    lost_evicted_gpu_h: float = 0.0
    lost_failed_gpu_h: float = 0.0

    @property
    def lost_unsplit_gpu_h(self) -> float:
        """Lost that ledger rows written before the split do not split."""
        return lost_unsplit(self)

    @property
    def utilisation(self) -> float | None:
        """Of the guarantee: the used GPU-hours that ran within it, over what it reserved."""
        if not self.guarantee_gpu_h:
            return None
        return (self.used_gpu_h - self.borrowed_gpu_h) / self.guarantee_gpu_h

    @property
    def spend(self) -> Decimal:
        """What the budget is measured against: cost, or GPU-hours used for a GPU-hour budget."""
        if self.budget_unit == Budget.Unit.GPU_HOURS:
            return money(Decimal(repr(self.used_gpu_h)))
        return self.cost

    @property
    def budget_used(self) -> float | None:
        """Spend over budget; none for the totals row, whose spend includes teams without one."""
        if self.budget is None or self.budget == 0 or self.budget_unit not in Budget.Unit.values:
            return None
        return float(self.spend / self.budget)


class _LostParts(Protocol):
    @property
    def lost_gpu_h(self) -> float: ...
    @property
    def lost_restore_gpu_h(self) -> float: ...
    @property
    def lost_topology_gpu_h(self) -> float: ...
    @property
    def lost_evicted_gpu_h(self) -> float: ...
    @property
    def lost_failed_gpu_h(self) -> float: ...


def lost_unsplit(row: _LostParts) -> float:
    """What is left of lost after its four parts: the lost of ledger rows older than the split."""
    parts = row.lost_restore_gpu_h + row.lost_topology_gpu_h + row.lost_evicted_gpu_h + row.lost_failed_gpu_h
    return row.lost_gpu_h - parts


# The ledger's lost columns (``scheduling.models.JobUsage``) -> the report's GPU-hour figures.
LOST_PARTS = {
    "lost_restore_gpu_s": "lost_restore_gpu_h",
    "lost_topology_gpu_s": "lost_topology_gpu_h",
    "lost_evicted_gpu_s": "lost_evicted_gpu_h",
    "lost_failed_gpu_s": "lost_failed_gpu_h",
}


@dataclass(frozen=True, slots=True)
class FleetLine:
    """The reconciliation line: every GPU-hour of capacity was allocated, idle or down."""

    capacity_gpu_h: float
    allocated_gpu_h: float
    idle_gpu_h: float
    down_gpu_h: float

    @property
    def unaccounted_gpu_h(self) -> float:
        return self.capacity_gpu_h - self.allocated_gpu_h - self.idle_gpu_h - self.down_gpu_h

    @property
    def utilisation(self) -> float:
        return self.allocated_gpu_h / self.capacity_gpu_h if self.capacity_gpu_h else 0.0


@dataclass(frozen=True, slots=True)
class RateUsed:
    accelerator: str
    price_per_gpu_hour: Decimal
    effective_from: date


@dataclass(frozen=True, slots=True)
class DayPoint:
    day: date
    team: str
    used_gpu_h: float


@dataclass(frozen=True, slots=True)
class ClosedInfo:
    closed_at: str
    closed_by: str


@dataclass(frozen=True)
class FinanceReport:
    first: date
    last: date
    currency: str
    charge_model: str
    rows: list[TeamRow]
    fleet: FleetLine | None
    rates: list[RateUsed]
    daily: list[DayPoint] = field(default_factory=list)
    closed: ClosedInfo | None = None

    @property
    def totals(self) -> TeamRow:
        def total(name: str) -> Any:
            return sum((getattr(row, name) for row in self.rows), start=ZERO if name == "cost" else 0.0)

        names = [f.name for f in fields(TeamRow) if f.type in ("float", "Decimal")]
        budgets = [row.budget for row in self.rows if row.budget is not None and row.budget_unit == Budget.Unit.MONEY]
        return TeamRow(
            team_id=0,
            team="Total",
            department="",
            budget=sum(budgets, start=ZERO) if budgets else None,
            budget_unit=TOTAL_BUDGETS if budgets else "",
            **{name: total(name) for name in names},
        )

    @property
    def charge_model_label(self) -> str:
        return FleetPolicy.ChargeModel(self.charge_model).label

    def to_json(self) -> dict[str, Any]:
        return _jsonable(asdict(self))

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FinanceReport:
        rows = [
            TeamRow(**{**row, "cost": Decimal(row["cost"]), "budget": _decimal(row["budget"])}) for row in data["rows"]
        ]
        fleet = FleetLine(**data["fleet"]) if data.get("fleet") else None
        rates = [
            RateUsed(r["accelerator"], Decimal(r["price_per_gpu_hour"]), date.fromisoformat(r["effective_from"]))
            for r in data["rates"]
        ]
        daily = [DayPoint(date.fromisoformat(p["day"]), p["team"], p["used_gpu_h"]) for p in data.get("daily", [])]
        closed = ClosedInfo(**data["closed"]) if data.get("closed") else None
        return cls(
            first=date.fromisoformat(data["first"]),
            last=date.fromisoformat(data["last"]),
            currency=data["currency"],
            charge_model=data["charge_model"],
            rows=rows,
            fleet=fleet,
            rates=rates,
            daily=daily,
            closed=closed,
        )

    def for_teams(self, team_ids: set[int]) -> FinanceReport:
        """The same report narrowed to some teams (a lead's), without the fleet-wide line."""
        names = {row.team for row in self.rows if row.team_id in team_ids}
        return replace(
            self,
            rows=[row for row in self.rows if row.team_id in team_ids],
            fleet=None,
            daily=[p for p in self.daily if p.team in names],
        )


def _decimal(value: str | None) -> Decimal | None:
    return None if value is None else Decimal(value)


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _jsonable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(item) for item in value]
    if isinstance(value, Decimal | date):
        return str(value) if isinstance(value, Decimal) else value.isoformat()
    return value


# --- who sees what -------------------------------------------------------------------------


def report_team_ids_for(*, user: AnyUser) -> set[int] | None:
    """The teams whose figures ``user`` may see: ``None`` for all (finance, fleet admins), a
    lead's own teams, or Http404 for anyone else (members, outsiders)."""
    if is_finance(user) or is_fleet_admin(user):
        return None
    if user.pk is None:  # signed out: no team of one's own
        raise Http404("No such page.")
    led = set(Membership.objects.filter(user_id=user.pk, role=Membership.Role.LEAD).values_list("team_id", flat=True))
    if not led:
        raise Http404("No such page.")
    return led


# --- rates ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RateBook:
    """Every accelerator type's rates in date order, for a price on any day."""

    days: dict[int, list[date]]
    prices: dict[int, list[Decimal]]

    def price(self, accelerator_id: int, day: date) -> Decimal:
        days = self.days.get(accelerator_id, [])
        at = bisect.bisect_right(days, day) - 1
        return self.prices[accelerator_id][at] if at >= 0 else ZERO


def rate_book() -> RateBook:
    days: dict[int, list[date]] = defaultdict(list)
    prices: dict[int, list[Decimal]] = defaultdict(list)
    for accelerator_id, day, price in Rate.objects.order_by("accelerator_type_id", "effective_from").values_list(
        "accelerator_type_id", "effective_from", "price_per_gpu_hour"
    ):
        days[accelerator_id].append(day)
        prices[accelerator_id].append(price)
    return RateBook(dict(days), dict(prices))


def rates_in_force(*, first: date, last: date) -> list[RateUsed]:
    """The rates that price some day of the period: the one in force on its first day and any
    that start inside it. One query."""
    by_type: dict[str, list[Rate]] = defaultdict(list)
    for rate in Rate.objects.select_related("accelerator_type").order_by("accelerator_type__name", "effective_from"):
        by_type[rate.accelerator_type.name].append(rate)
    used = []
    for name, rates in sorted(by_type.items()):
        starting = [r for r in rates if r.effective_from <= first]
        chosen = ([starting[-1]] if starting else []) + [r for r in rates if first < r.effective_from <= last]
        used += [RateUsed(name, r.price_per_gpu_hour, r.effective_from) for r in chosen]
    return used


def rate_history() -> list[Rate]:
    return list(Rate.objects.select_related("accelerator_type", "created_by").order_by("-effective_from", "-id"))


# --- the report ----------------------------------------------------------------------------


def _covered_hours(period: FleetPeriod, now_s: float) -> float:
    """Hours of the period the fleet has run: from fleet second 0 to now."""
    return max(0.0, min(period.to_s, now_s) - max(period.from_s, 0.0)) / 3600


def _days(first: date, last: date) -> list[date]:
    return [first + timedelta(days=n) for n in range((last - first).days + 1)]


def _budget_for_period(monthly: Decimal, first: date, last: date) -> Decimal:
    """A monthly budget over whole days: each month's share by the days of it in the period."""
    total = ZERO
    day = first
    while day <= last:
        month_first, month_last = month_bounds(day.year, day.month)
        upto = min(month_last, last)
        total += monthly * Decimal((upto - day).days + 1) / Decimal((month_last - month_first).days + 1)
        day = upto + timedelta(days=1)
    return money(total)


@dataclass
class _Acc:
    used: float = 0.0
    useful: float = 0.0
    lost: float = 0.0
    borrowed: float = 0.0
    kinds: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    cost: Decimal = ZERO
    lost_parts: dict[str, float] = field(default_factory=lambda: dict.fromkeys(LOST_PARTS.values(), 0.0))


def _usage_by_team(
    first: date, last: date, team_ids: set[int] | None, book: RateBook, model: str
) -> tuple[dict[int, _Acc], dict[tuple[date, int], float]]:
    usage = JobUsage.objects.filter(day__gte=first, day__lte=last)
    if team_ids is not None:
        usage = usage.filter(team_id__in=team_ids)
    acc: dict[int, _Acc] = defaultdict(_Acc)
    daily: dict[tuple[date, int], float] = defaultdict(float)
    for row in usage.values("team_id", "accelerator_type_id", "kind", "day").annotate(
        used=Sum("allocated_gpu_s"),
        useful=Sum("useful_gpu_s"),
        lost=Sum("lost_gpu_s"),
        borrowed=Sum("borrowed_gpu_s"),
        **{part: Sum(part) for part in LOST_PARTS},
    ):
        a = acc[row["team_id"]]
        used_h, borrowed_h = row["used"] / 3600, row["borrowed"] / 3600
        a.used += used_h
        a.useful += row["useful"] / 3600
        a.lost += row["lost"] / 3600
        a.borrowed += borrowed_h
        sums: dict[str, Any] = dict(row)
        for part, name in LOST_PARTS.items():
            a.lost_parts[name] += sums[part] / 3600
        a.kinds[row["kind"]] += used_h
        charged_h = used_h if model == FleetPolicy.ChargeModel.USAGE else borrowed_h
        a.cost += Decimal(repr(charged_h)) * book.price(row["accelerator_type_id"], row["day"])
        daily[(row["day"], row["team_id"])] += used_h
    return acc, daily


def _guarantees(
    first: date, last: date, team_ids: set[int] | None, book: RateBook, model: str, now_s: float
) -> tuple[dict[int, float], dict[int, Decimal]]:
    """Each team's guaranteed GPU-hours over the period (current quotas, for the hours the fleet
    ran), and what the guarantee charge model bills for them."""
    quotas = Quota.objects.filter(guaranteed__gt=0)
    if team_ids is not None:
        quotas = quotas.filter(team_id__in=team_ids)
    epoch = fleet_epoch()
    hours = {day: _covered_hours(fleet_period(first=day, last=day, epoch=epoch), now_s) for day in _days(first, last)}
    gpu_h: dict[int, float] = defaultdict(float)
    cost: dict[int, Decimal] = defaultdict(lambda: ZERO)
    for team_id, accelerator_id, guaranteed in quotas.values_list("team_id", "accelerator_type_id", "guaranteed"):
        for day, day_h in hours.items():
            gpu_h[team_id] += guaranteed * day_h
            if model == FleetPolicy.ChargeModel.GUARANTEE:
                cost[team_id] += Decimal(repr(guaranteed * day_h)) * book.price(accelerator_id, day)
    return gpu_h, cost


def fleet_line(*, period: FleetPeriod) -> FleetLine:
    fleet = FleetSample.objects.filter(sim_time_s__gte=period.from_s, sim_time_s__lt=period.to_s).aggregate(
        capacity=Sum(F("capacity_gpus") * F("interval_s")), idle=Sum("idle_gpu_s"), down=Sum("down_gpu_s")
    )
    allocated = JobUsage.objects.filter(day__gte=period.first, day__lte=period.last).aggregate(
        total=Sum("allocated_gpu_s")
    )["total"]
    return FleetLine(
        (fleet["capacity"] or 0.0) / 3600,
        (allocated or 0.0) / 3600,
        (fleet["idle"] or 0.0) / 3600,
        (fleet["down"] or 0.0) / 3600,
    )


def finance_report_build(*, first: date, last: date, team_ids: set[int] | None = None) -> FinanceReport:
    """The live report from the ledgers, for all teams or some."""
    policy = FleetPolicy.objects.filter(pk=FleetPolicy.SINGLETON_ID).first()
    model = policy.charge_model if policy else FleetPolicy.ChargeModel.USAGE
    book = rate_book()
    now_s = FleetClock.objects.filter(pk=1).values_list("sim_now_s", flat=True).first() or 0.0
    usage, daily = _usage_by_team(first, last, team_ids, book, model)
    guarantee_h, guarantee_cost = _guarantees(first, last, team_ids, book, model, now_s)
    budgets = {b.team_id: b for b in Budget.objects.all()}
    teams = Team.objects.select_related("department").order_by("name")
    if team_ids is not None:
        teams = teams.filter(pk__in=team_ids)
    rows = []
    names = {}
    for team in teams:
        names[team.pk] = team.name
        a = usage.get(team.pk, _Acc())
        budget = budgets.get(team.pk)
        if not (a.used or a.lost or guarantee_h.get(team.pk) or budget):
            continue
        rows.append(
            TeamRow(
                team_id=team.pk,
                team=team.name,
                department=team.department.name if team.department else "",
                guarantee_gpu_h=guarantee_h.get(team.pk, 0.0),
                used_gpu_h=a.used,
                useful_gpu_h=a.useful,
                lost_gpu_h=a.lost,
                borrowed_gpu_h=a.borrowed,
                serving_gpu_h=a.kinds.get("serving", 0.0),
                training_gpu_h=a.kinds.get("training", 0.0),
                batch_gpu_h=a.kinds.get("batch", 0.0),
                cost=money(a.cost + guarantee_cost.get(team.pk, ZERO)),
                budget=_budget_for_period(budget.monthly_amount, first, last) if budget else None,
                budget_unit=budget.unit if budget else "",
                **a.lost_parts,
            )
        )
    return FinanceReport(
        first=first,
        last=last,
        currency=settings.FINANCE_CURRENCY,
        charge_model=model,
        rows=rows,
        fleet=fleet_line(period=fleet_period(first=first, last=last)) if team_ids is None else None,
        rates=rates_in_force(first=first, last=last),
        daily=[
            DayPoint(day, names[team_id], used) for (day, team_id), used in sorted(daily.items()) if team_id in names
        ],
    )


def month_close_active(*, first: date, last: date) -> MonthClose | None:
    """The close of the month that is exactly ``first``..``last``, if it is closed."""
    if first.day != 1 or month_bounds(first.year, first.month)[1] != last:
        return None
    return MonthClose.objects.filter(month=first, reopened_at__isnull=True).select_related("closed_by").first()


def finance_report(*, user: AnyUser, first: date, last: date) -> FinanceReport:
    """The report ``user`` may see for whole days ``first``..``last``: a closed month as it was
    closed, any other period from the ledgers as they are now."""
    team_ids = report_team_ids_for(user=user)
    closed = month_close_active(first=first, last=last)
    if closed is not None:
        report = FinanceReport.from_json(closed.snapshot)
        return report if team_ids is None else report.for_teams(team_ids)
    return finance_report_build(first=first, last=last, team_ids=team_ids)


def months_closed() -> list[MonthClose]:
    return list(MonthClose.objects.select_related("closed_by", "reopened_by").order_by("-month", "-closed_at")[:36])


# --- per job -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class JobLine:
    job_id: int
    name: str
    team: str
    user: str
    accelerator: str
    kind: str
    gpu_h: float
    useful_gpu_h: float
    lost_gpu_h: float
    cost: Decimal
    lost_restore_gpu_h: float = 0.0
    lost_topology_gpu_h: float = 0.0
    lost_evicted_gpu_h: float = 0.0
    lost_failed_gpu_h: float = 0.0

    @property
    def lost_unsplit_gpu_h(self) -> float:
        return lost_unsplit(self)


def job_lines(
    *, user: AnyUser, first: date, last: date, team_id: int | None = None, username: str = ""
) -> list[JobLine]:
    """Every job that held GPUs in the period (like ``sacct``), with its cost at the day's rate
    under the usage charge model. Their GPU-hours sum to the team rows' used GPU-hours."""
    team_ids = report_team_ids_for(user=user)
    usage = JobUsage.objects.filter(day__gte=first, day__lte=last)
    if team_ids is not None:
        usage = usage.filter(team_id__in=team_ids)
    if team_id is not None:
        usage = usage.filter(team_id=team_id)
    if username:
        usage = usage.filter(job__submitted_by__username=username)
    book = rate_book()
    lines: dict[int, dict[str, Any]] = {}
    for row in (
        usage.values(
            "job_id",
            "job__name",
            "team__name",
            "job__submitted_by__username",
            "accelerator_type_id",
            "accelerator_type__name",
            "kind",
            "day",
        )
        .annotate(
            used=Sum("allocated_gpu_s"),
            useful=Sum("useful_gpu_s"),
            lost=Sum("lost_gpu_s"),
            **{part: Sum(part) for part in LOST_PARTS},
        )
        .order_by("team__name", "job_id", "day")
    ):
        line = lines.setdefault(
            row["job_id"],
            {
                "job_id": row["job_id"],
                "name": row["job__name"],
                "team": row["team__name"],
                "user": row["job__submitted_by__username"] or "",
                "accelerator": row["accelerator_type__name"],
                "kind": row["kind"],
                "gpu_h": 0.0,
                "useful_gpu_h": 0.0,
                "lost_gpu_h": 0.0,
                "cost": ZERO,
                **dict.fromkeys(LOST_PARTS.values(), 0.0),
            },
        )
        line["gpu_h"] += row["used"] / 3600
        line["useful_gpu_h"] += row["useful"] / 3600
        line["lost_gpu_h"] += row["lost"] / 3600
        sums: dict[str, Any] = dict(row)
        for part, name in LOST_PARTS.items():
            line[name] += sums[part] / 3600
        line["cost"] += Decimal(repr(row["used"] / 3600)) * book.price(row["accelerator_type_id"], row["day"])
    return [JobLine(**{**line, "cost": money(line["cost"])}) for line in lines.values()]


# --- budgets -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BudgetStatus:
    team_id: int
    team: str
    month: date
    budget: Decimal
    unit: str
    spend: Decimal
    currency: str

    @property
    def percent(self) -> float:
        return float(self.spend / self.budget * 100) if self.budget else 0.0

    @property
    def unit_label(self) -> str:
        return self.currency if self.unit == Budget.Unit.MONEY else "GPU-h"


def budget_statuses(*, month_first: date, team_ids: set[int] | None = None) -> list[BudgetStatus]:
    """Spend against budget this fleet calendar month, for teams that have a budget."""
    budgets = Budget.objects.select_related("team")
    if team_ids is not None:
        budgets = budgets.filter(team_id__in=team_ids)
    budgets_by_team = {b.team_id: b for b in budgets}
    if not budgets_by_team:
        return []
    first, last = month_bounds(month_first.year, month_first.month)
    report = finance_report_build(first=first, last=last, team_ids=set(budgets_by_team))
    statuses = []
    for row in report.rows:
        budget = budgets_by_team[row.team_id]
        statuses.append(
            BudgetStatus(
                row.team_id, row.team, first, budget.monthly_amount, budget.unit, row.spend, settings.FINANCE_CURRENCY
            )
        )
    return statuses


def team_budget_status(*, team: Team, month_first: date) -> BudgetStatus | None:
    found = budget_statuses(month_first=month_first, team_ids={team.pk})
    return found[0] if found else None
