"""The fleet policy in people's units: what each stored field is called, in which unit it is
shown and entered, and what it does. The policy form and the audit log both read this table, so
a half-life is "7 days" on both, never "604800.0".

Stored values keep the model's units (seconds, ratios); a unit converts with ``to_shown`` and
``to_stored`` (affine: ``shown = (stored - offset) / factor``).

Each number also has its bounds here, in stored units, both ends included: the model's validators
(so ``full_clean``, the services and the API), the policy form (in its own units, the range said
in its help) and the scheduling cycle's check of the stored row (`tenants.selectors.
fleet_policy_for_cycle`) all read them. They are what makes sense for a fleet: a heartbeat every
second to every ten minutes, a node dead after at most twenty missed ones, shares within 0-100 %,
waits up to thirty days; a value past them (``1e16`` s between heartbeats) stops being a policy
and starts breaking arithmetic."""

from __future__ import annotations

import math
from dataclasses import dataclass

from scheduling.limits import quantity


@dataclass(frozen=True, slots=True)
class Unit:
    suffix: str  # appended to the field name of the form and to labels: "days"
    factor: float = 1.0
    offset: float = 0.0
    symbol: str = ""  # after a shown value: "%", " h"
    singular: str = ""  # after a shown value of exactly 1, when it differs: " day"

    def to_shown(self, stored: float | None) -> float | None:
        if stored is None:
            return None
        shown = (stored - self.offset) / self.factor
        return round(shown, 6)

    def to_stored(self, shown: float | None) -> float | None:
        # Rounded so that "15 %" stores 1.15, not 1.1500000000000001.
        return None if shown is None else round(shown * self.factor + self.offset, 9)


SECONDS = Unit("seconds", symbol=" s")
MINUTES = Unit("minutes", 60.0, symbol=" min")
HOURS = Unit("hours", 3600.0, symbol=" h")
DAYS = Unit("days", 86400.0, symbol=" days", singular=" day")
# 1.15 stored (a speed divisor) is "15 % slower"; 1.3 (a step-time ratio) is "30 % over".
PERCENT_OVER_ONE = Unit("percent", 0.01, 1.0, symbol=" %")
PERCENT = Unit("percent", 0.01, symbol=" %")
COUNT = Unit("", symbol="")

HOUR_S = 3600.0
DAY_S = 86400.0
# Waits and bounds on waits: a month of fleet time is longer than any job should wait for anything.
MAX_WAIT_S = 30 * DAY_S


@dataclass(frozen=True, slots=True)
class PolicyField:
    name: str  # the model's field
    label: str
    help: str
    unit: Unit | None = None  # None: not a number (a switch or a choice)
    # In stored units (seconds, ratios), both ends included; every number has both.
    minimum: float | None = None
    maximum: float | None = None

    @property
    def form_name(self) -> str:
        if self.unit is None or not self.unit.suffix or self.unit is SECONDS:
            return self.name
        return f"{self.name.removesuffix('_s').removesuffix('_ratio')}_{self.unit.suffix}"

    @property
    def shown_bounds(self) -> tuple[float, float]:
        """(minimum, maximum) in the form's units: ``(0.1, 365.0)`` days for the half-life."""
        assert self.unit is not None and self.minimum is not None and self.maximum is not None, self.name
        low, high = self.unit.to_shown(self.minimum), self.unit.to_shown(self.maximum)
        assert low is not None and high is not None
        return low, high

    @property
    def shown_range(self) -> str:
        """The bounds in the form's units: "between 0.1 and 365 days"."""
        assert self.unit is not None
        low, high = self.shown_bounds
        return f"between {quantity(low)} and {quantity(high)}{self.unit.symbol}"

    @property
    def stored_range(self) -> str:
        """The bounds in the API's units (seconds, ratios), and in the form's when they differ:
        "between 8,640 and 31,536,000 s (0.1 to 365 days)"."""
        assert self.unit is not None and self.minimum is not None and self.maximum is not None
        suffix = " s" if self.name.endswith("_s") else ""
        text = f"between {quantity(self.minimum)} and {quantity(self.maximum)}{suffix}"
        if self.unit.factor != 1.0 or self.unit.offset != 0.0:
            low, high = self.shown_bounds
            text += f" ({quantity(low)} to {quantity(high)}{self.unit.symbol})"
        return text

    def problem(self, value: object) -> str | None:
        """Why a stored ``value`` cannot be used ("is not finite", "is above 600"), or None. A
        switch or a choice is checked by the model's own field; None is for the caller to allow."""
        if self.minimum is None or self.maximum is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            return "is not a number"
        if not _finite(value):
            return "is not finite"
        if value < self.minimum:
            return f"is below {quantity(self.minimum)}"
        if value > self.maximum:
            return f"is above {quantity(self.maximum)}"
        return None


def _finite(value: float) -> bool:
    try:
        return math.isfinite(value)
    except OverflowError:  # an integer too large for a float
        return False


POLICY_FIELDS: tuple[PolicyField, ...] = (
    PolicyField(
        "fairshare_half_life_s",
        "Fair-share half-life",
        "How fast past use is forgotten: use this long ago counts half as much as use now.",
        DAYS,
        minimum=0.1 * DAY_S,
        maximum=365 * DAY_S,
    ),
    PolicyField(
        "fairshare_age_weight",
        "Waiting-time weight",
        "Added to a team's fair-share priority (1 = nothing used, 0.5 = used its share) for a job that has "
        "waited the full age below, in proportion before. 0 (the default): a team's jobs share its priority "
        "and go in the order within a team, after those that waited the full age.",
        COUNT,
        minimum=0.0,
        maximum=100.0,
    ),
    PolicyField(
        "fairshare_max_age_s",
        "Waiting time at full weight",
        "After waiting this long a job gets the whole waiting-time weight; without a weight, it goes ahead "
        "of its team's jobs that waited less; with shortest limit first, ahead of every job that waited less.",
        HOURS,
        minimum=0.1 * HOUR_S,
        maximum=MAX_WAIT_S,
    ),
    PolicyField(
        "gang_spread_after_s",
        "Gangs wait for one domain for at most",
        "How long a multi-node gang waits for the narrowest domain that can hold it (usually one rack) "
        "before it may be spread wider; at once if none frees within 30 days. Empty: it always waits.",
        HOURS,
        minimum=0.0,
        maximum=MAX_WAIT_S,
    ),
    PolicyField(
        "guarantee_spread_after_s",
        "Gangs of a team below its guarantee wait for at most",
        "The same bound for a gang of a team that uses less than its guarantee: while it waits for one "
        "domain, its team's unused guarantee is lent to others. The shorter of the two applies; 0: such a "
        "gang takes the first placement it can get. Empty: it waits as any other gang.",
        HOURS,
        minimum=0.0,
        maximum=MAX_WAIT_S,
    ),
    PolicyField(
        "backfill",
        "Backfill",
        "Let later, smaller jobs start in idle gaps when they cannot delay the reserved start of the jobs ahead.",
    ),
    PolicyField(
        "reservation_depth",
        "Reserved starts",
        "How many waiting jobs have nodes held for their estimated start; 1 is EASY backfill, more is "
        "conservative backfill (fairer to large jobs, fewer gaps to fill).",
        COUNT,
        minimum=1,
        maximum=16,
    ),
    PolicyField(
        "preemption",
        "Preemption",
        "Let higher-priority work, and teams reclaiming their guarantee, evict preemptible jobs.",
    ),
    PolicyField(
        "preemption_grace_s",
        "Preemption grace",
        "How long a preempted job has to stop (and to checkpoint, if it does so when told) before the job "
        "that preempted it starts on its GPUs.",
        SECONDS,
        minimum=0.0,
        maximum=HOUR_S,
    ),
    PolicyField(
        "reclaim_after_s",
        "Evict anyway after waiting",
        "A job evicts running work only when the work lost is worth less than the wait it saves. Once it has "
        "waited this long, taking back another team's loans it evicts anyway (or, with the credit below, "
        "for that many times all it has waited), and a job of higher priority counts all it has waited as "
        "saved. Empty: only the wait to its natural start counts.",
        HOURS,
        minimum=0.0,
        maximum=MAX_WAIT_S,
    ),
    PolicyField(
        "reclaim_wait_credit",
        "Credit of a reclaim, times the wait so far",
        "Taking back another team's loans, a job counts as saved the wait until the running work would have "
        "made room anyway (read from time limits, which overstate it), but no more than this many times what "
        "it has already waited. 1: an owner waits about as long as the eviction would destroy. Empty: no "
        "such bound.",
        COUNT,
        minimum=0.0,
        maximum=1000.0,
    ),
    PolicyField(
        "reclaim_guaranteed_share",
        "Reclaim for a job partly within the guarantee",
        "A job larger than what is left of its team's guarantee may still evict other teams' borrowed work "
        "when at least this share of it lies within that guarantee (it borrows the rest): only work that "
        "checkpoints, periodically or when told it is preempted, or that started within the bound for young "
        "loans, so that what it loses is bounded, and only when the work lost is worth less than the wait "
        "it saves its GPUs within the guarantee (never by waiting alone). 0 %: any job of a team with "
        "guarantee left; 100 %: only a job that fits within it whole.",
        PERCENT,
        minimum=0.0,
        maximum=1.0,
    ),
    PolicyField(
        "partial_reclaim_young_s",
        "Young loans a partial reclaim may take",
        "Such a job may also evict borrowed work that does not checkpoint when it started (or last "
        "restarted) at most this long ago: it loses at most this much work. Empty: only work that "
        "checkpoints.",
        HOURS,
        minimum=0.0,
        maximum=MAX_WAIT_S,
    ),
    PolicyField(
        "queue_order",
        "Order across teams",
        "Within a priority class: the fair-share score with age, then the order within a team; or the "
        "jobs that waited the maximum age first, then the shortest time limit whatever the team (each "
        "team keeps its guarantee; shorter turnaround at overload, less reliable estimates, a little "
        "less of the fleet used).",
    ),
    PolicyField(
        "least_borrowed_first",
        "Borrowers of teams that borrow least first",
        "Jobs within their team's guarantee always go first, whatever their priority class; the jobs that "
        "would borrow come after them, by class. On: within a class they go in order of how many GPUs "
        "their team already borrows, fewest first (a team below its guarantee borrows none), and among "
        "equals the job with the larger share of its size within what is left of its team's guarantee "
        "first; off: in queue order. On keeps guarantees better at overload (about half the violations on "
        "the benchmark) for about 1 % of the fleet's goodput.",
    ),
    PolicyField(
        "quota_hold_after_s",
        "Keep quota for a team's job waiting longer than",
        "Once the first of a team's waiting jobs (for its quota limit or for free GPUs) has waited this long, "
        "it keeps its size within the team's limit, and the team's later jobs start only within the rest "
        "(always within the guarantee), so a large job is not overtaken for ever by its own team's smaller "
        "ones; what the team leaves idle meanwhile is lent to other teams. Empty: later jobs take whatever "
        "the team's quota has left.",
        HOURS,
        minimum=0.0,
        maximum=MAX_WAIT_S,
    ),
    PolicyField(
        "within_team_order",
        "Order within a team",
        "Which of a team's own jobs goes first once priority class and fair share are equal.",
    ),
    PolicyField(
        "topology_penalty_node",
        "Slowdown within one node",
        "How much slower a gang runs inside one node than ideal; 0 % is full speed.",
        PERCENT_OVER_ONE,
        minimum=1.0,
        maximum=10.0,
    ),
    PolicyField(
        "topology_penalty_rack",
        "Slowdown across nodes of one rack",
        "How much slower a gang runs when its nodes share one rack.",
        PERCENT_OVER_ONE,
        minimum=1.0,
        maximum=10.0,
    ),
    PolicyField(
        "topology_penalty_pod",
        "Slowdown across racks of one pod",
        "How much slower a gang runs when it spans racks of one pod (network spine).",
        PERCENT_OVER_ONE,
        minimum=1.0,
        maximum=10.0,
    ),
    PolicyField(
        "topology_penalty_fleet",
        "Slowdown across pods",
        "How much slower a gang runs when it spans pods.",
        PERCENT_OVER_ONE,
        minimum=1.0,
        maximum=10.0,
    ),
    PolicyField(
        "guarantee_overcommit_ratio",
        "Guarantees may total",
        "Of the fleet's GPUs of each accelerator type, how much the guarantees approved may add up to; above "
        "100 % some guarantees cannot all be honoured at once.",
        PERCENT,
        minimum=0.01,
        maximum=10.0,
    ),
    PolicyField(
        "heartbeat_interval_s",
        "Heartbeat interval",
        "How often every node reports that it is alive.",
        SECONDS,
        minimum=1.0,
        maximum=600.0,
    ),
    PolicyField(
        "dead_after_missed_heartbeats",
        "Dead after missed heartbeats",
        "A node that misses this many heartbeats in a row is declared dead and its gangs restart elsewhere.",
        COUNT,
        minimum=1,
        maximum=20,
    ),
    PolicyField(
        "slow_threshold",
        "Slow when steps take longer by",
        "A node whose step time is this much above its gang's median counts as slow.",
        PERCENT_OVER_ONE,
        minimum=1.0,
        maximum=10.0,
    ),
    PolicyField(
        "slow_consecutive_steps",
        "Slow after consecutive slow steps",
        "A node is cordoned once it has been slow for this many steps in a row.",
        COUNT,
        minimum=1,
        maximum=100,
    ),
    PolicyField(
        "charge_model",
        "Charge model",
        "How reports charge teams: for what they used, or for the capacity reserved for them whether used or "
        "not, plus what they borrowed beyond it.",
    ),
)
BY_NAME = {field.name: field for field in POLICY_FIELDS}


def shown_text(name: str, value: object) -> str:
    """A stored policy value as people read it: ``604800.0`` -> ``7 days``, ``1.15`` -> ``15 %``."""
    field = BY_NAME.get(name)
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "on" if value else "off"
    if field is None or field.unit is None or not isinstance(value, int | float):
        return str(value)
    shown = field.unit.to_shown(float(value))
    if shown is None:
        return "none"
    symbol = field.unit.singular if shown == 1 and field.unit.singular else field.unit.symbol
    return f"{shown:g}{symbol}"
