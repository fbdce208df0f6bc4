"""The fleet policy in people's units: what each stored field is called, in which unit it is
shown and entered, and what it does. The policy form and the audit log both read this table, so
a half-life is "7 days" on both, never "604800.0".

Stored values keep the model's units (seconds, ratios); a unit converts with ``to_shown`` and
``to_stored`` (affine: ``shown = (stored - offset) / factor``)."""

from __future__ import annotations

from dataclasses import dataclass


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


@dataclass(frozen=True, slots=True)
class PolicyField:
    name: str  # the model's field
    label: str
    help: str
    unit: Unit | None = None  # None: not a number (a switch or a choice)

    @property
    def form_name(self) -> str:
        if self.unit is None or not self.unit.suffix or self.unit is SECONDS:
            return self.name
        return f"{self.name.removesuffix('_s').removesuffix('_ratio')}_{self.unit.suffix}"


POLICY_FIELDS: tuple[PolicyField, ...] = (
    PolicyField(
        "fairshare_half_life_s",
        "Fair-share half-life",
        "How fast past use is forgotten: use this long ago counts half as much as use now.",
        DAYS,
    ),
    PolicyField(
        "fairshare_age_weight",
        "Waiting-time weight",
        "Added to a team's fair-share priority (1 = nothing used, 0.5 = used its share) for a job that has "
        "waited the full age below, in proportion before. 0 (the default): a team's jobs share its priority "
        "and go in the order within a team, after those that waited the full age.",
        COUNT,
    ),
    PolicyField(
        "fairshare_max_age_s",
        "Waiting time at full weight",
        "After waiting this long a job gets the whole waiting-time weight; without a weight, it goes ahead "
        "of its team's jobs that waited less; with shortest limit first, ahead of every job that waited less.",
        HOURS,
    ),
    PolicyField(
        "gang_spread_after_s",
        "Gangs wait for one domain for at most",
        "How long a multi-node gang waits for the narrowest domain that can hold it (usually one rack) "
        "before it may be spread wider; at once if none frees within 30 days. Empty: it always waits.",
        HOURS,
    ),
    PolicyField(
        "guarantee_spread_after_s",
        "Gangs of a team below its guarantee wait for at most",
        "The same bound for a gang of a team that uses less than its guarantee: while it waits for one "
        "domain, its team's unused guarantee is lent to others. The shorter of the two applies; 0: such a "
        "gang takes the first placement it can get. Empty: it waits as any other gang.",
        HOURS,
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
    ),
    PolicyField(
        "reclaim_after_s",
        "Evict anyway after waiting",
        "A job evicts running work only when the work lost is worth less than the wait it saves. Once it has "
        "waited this long, taking back another team's loans it evicts anyway (or, with the credit below, "
        "for that many times all it has waited), and a job of higher priority counts all it has waited as "
        "saved. Empty: only the wait to its natural start counts.",
        HOURS,
    ),
    PolicyField(
        "reclaim_wait_credit",
        "Credit of a reclaim, times the wait so far",
        "Taking back another team's loans, a job counts as saved the wait until the running work would have "
        "made room anyway (read from time limits, which overstate it), but no more than this many times what "
        "it has already waited. 1: an owner waits about as long as the eviction would destroy. Empty: no "
        "such bound.",
        COUNT,
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
    ),
    PolicyField(
        "partial_reclaim_young_s",
        "Young loans a partial reclaim may take",
        "Such a job may also evict borrowed work that does not checkpoint when it started (or last "
        "restarted) at most this long ago: it loses at most this much work. Empty: only work that "
        "checkpoints.",
        HOURS,
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
    ),
    PolicyField(
        "topology_penalty_rack",
        "Slowdown across nodes of one rack",
        "How much slower a gang runs when its nodes share one rack.",
        PERCENT_OVER_ONE,
    ),
    PolicyField(
        "topology_penalty_pod",
        "Slowdown across racks of one pod",
        "How much slower a gang runs when it spans racks of one pod (network spine).",
        PERCENT_OVER_ONE,
    ),
    PolicyField(
        "topology_penalty_fleet",
        "Slowdown across pods",
        "How much slower a gang runs when it spans pods.",
        PERCENT_OVER_ONE,
    ),
    PolicyField(
        "guarantee_overcommit_ratio",
        "Guarantees may total",
        "Of the fleet's GPUs of each accelerator type, how much the guarantees approved may add up to; above "
        "100 % some guarantees cannot all be honoured at once.",
        PERCENT,
    ),
    PolicyField(
        "heartbeat_interval_s",
        "Heartbeat interval",
        "How often every node reports that it is alive.",
        SECONDS,
    ),
    PolicyField(
        "dead_after_missed_heartbeats",
        "Dead after missed heartbeats",
        "A node that misses this many heartbeats in a row is declared dead and its gangs restart elsewhere.",
        COUNT,
    ),
    PolicyField(
        "slow_threshold",
        "Slow when steps take longer by",
        "A node whose step time is this much above its gang's median counts as slow.",
        PERCENT_OVER_ONE,
    ),
    PolicyField(
        "slow_consecutive_steps",
        "Slow after consecutive slow steps",
        "A node is cordoned once it has been slow for this many steps in a row.",
        COUNT,
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
