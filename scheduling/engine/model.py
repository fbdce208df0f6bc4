"""Frozen inputs of one scheduling cycle.

Everything the engine reads is one of these dataclasses; collections are tuples so a snapshot can
be shared between the live cycle, the simulator and tests without anyone mutating it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .knobs import (
    COUNT,
    DAY_S,
    DAYS,
    ENGINE,
    HOUR_S,
    HOURS,
    INTERNAL,
    MAX_WAIT_S,
    PERCENT,
    PERCENT_OVER_ONE,
    SECONDS,
    Knob,
    knob,
    knob_parts,
)
from .progress import work_gpu_s

# The levels, kinds and orders are the shared vocabulary's, re-exported where they always were.
from .vocabulary import JOB_KINDS as JOB_KINDS
from .vocabulary import LEVEL_RANK as LEVEL_RANK
from .vocabulary import LEVELS as LEVELS
from .vocabulary import QUEUE_ORDER_LABELS, WITHIN_TEAM_ORDER_LABELS
from .vocabulary import WITHIN_TEAM_ORDERS as WITHIN_TEAM_ORDERS

DEFAULT_LEVEL_PENALTY: tuple[tuple[str, float], ...] = (
    ("node", 1.0),
    ("rack", 1.0),
    ("pod", 1.15),
    ("fleet", 1.4),
)


@dataclass(frozen=True, slots=True)
class Node:
    id: str
    pod: str
    rack: str
    accelerator: str
    gpus: int = 8
    healthy_gpus: int = 8
    cordoned: bool = False

    @property
    def rack_key(self) -> str:
        """Rack names are only unique inside their pod."""
        return f"{self.pod}/{self.rack}"

    @property
    def usable_gpus(self) -> int:
        return 0 if self.cordoned else max(0, min(self.gpus, self.healthy_gpus))


# One tuple object per shape of job (`Job.shape`), interned by value. Bounded: past
# `SHAPES_KEPT` shapes the oldest is forgotten, and a job of a forgotten shape brings its own
# object, which only makes it a shape apart in `schedule.QueueShapes` (its lookups made twice,
# the plan the same: `test_fast_paths.py`).
JobShape = tuple[int, str, str, int, int | None]
SHAPES_KEPT = 1 << 16
_SHAPES: dict[JobShape, JobShape] = {}


def _interned(shape: JobShape) -> JobShape:
    kept = _SHAPES.get(shape)
    if kept is None:
        if len(_SHAPES) >= SHAPES_KEPT:
            del _SHAPES[next(iter(_SHAPES))]
        kept = _SHAPES[shape] = shape
    return kept


@dataclass(frozen=True, slots=True)
class Job:
    id: str
    team: str
    kind: str
    priority: int
    preemptible: bool
    accelerator: str
    gpus: int
    duration_s: float
    submit_s: float
    time_limit_s: float | None = None
    min_gpus: int | None = None
    max_gpus: int | None = None
    checkpoint_interval_s: float | None = None
    checkpoint_gb: float = 0.0
    required_level: str | None = None
    preferred_level: str | None = None
    # GPU-seconds of service already received (set when a job is requeued); drives the
    # least-attained-service order.
    attained_gpu_s: float = 0.0
    # The job writes a checkpoint when it is told it is preempted: it loses only the grace period
    # it takes to do so, never the work since its last periodic checkpoint.
    checkpoint_on_preempt: bool = False
    # Its priority class may evict or shrink running work to start (Kubernetes' preemptionPolicy
    # PreemptLowerPriority); False is `Never`: it waits for room instead. Either way it may itself
    # be a victim, as its own priority, preemptibility and borrowing say.
    may_preempt: bool = True
    # Requeued by a node failure (its last eviction was the failure's, not a preemption): it goes
    # back ahead of its priority class's other waiting jobs (`ordering.failed_first`), so that work
    # a failure interrupted gets its place back before new work takes it.
    requeued_by_failure: bool = False
    # (priority, team, accelerator, gpus, min_gpus): what the queue's order of owners and borrowers
    # reads of a job (`schedule.QueueShapes`), made once per job, one object for every job of the
    # shape (an unpickled job brings its own copy, which only counts as a shape of its own).
    shape: JobShape = field(init=False, repr=False, compare=False)
    # The runtime the scheduler plans with: the time limit when given, else the duration (a field
    # made once per job, read as a plain attribute where long queues are sorted by it).
    estimate_s: float = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        shape = (self.priority, self.team, self.accelerator, self.gpus, self.min_gpus)
        object.__setattr__(self, "shape", _interned(shape))
        object.__setattr__(self, "estimate_s", self.duration_s if self.time_limit_s is None else self.time_limit_s)

    @property
    def is_elastic(self) -> bool:
        return self.min_gpus is not None and self.min_gpus < self.gpus


@dataclass(frozen=True, slots=True)
class Running:
    job: Job
    allocation: tuple[tuple[str, int], ...]
    start_s: float
    progress_s: float
    checkpoint_s: float
    borrowing: bool
    grace_until_s: float | None = None
    # When the run's work is done at its progress rate, anchored where the rate last changed
    # (`FleetState` knows it); None: from `progress_s` at the cycle's time (`backfill.expected_end_s`).
    release_s: float | None = None

    @property
    def gpus(self) -> int:
        return sum(gpus for _, gpus in self.allocation)

    @property
    def lost_gpu_s(self) -> float:
        """Work that preempting this job now would roll back, in GPU-seconds: everything since its
        last checkpoint (since its start, without one), or nothing when it checkpoints on preemption."""
        if self.job.checkpoint_on_preempt:
            return 0.0
        return work_gpu_s(self.progress_s, self.checkpoint_s, self.job.gpus)


@dataclass(frozen=True, slots=True)
class Quota:
    team: str
    accelerator: str
    guaranteed: int
    borrow_limit: int
    lend_limit: int | None = None


@dataclass(frozen=True, slots=True)
class Team:
    id: str
    department: str
    fairshare_weight: float = 1.0


def _penalty_knob(level: str, label: str, help: str) -> Knob:
    """The stored knob of one level's entry of `Policy.level_penalty`."""
    return Knob(
        name=f"topology_penalty_{level}",
        kind=float,
        default=dict(DEFAULT_LEVEL_PENALTY)[level],
        label=label,
        help=help,
        unit=PERCENT_OVER_ONE,
        minimum=1.0,
        maximum=10.0,
        level=level,
    )


@dataclass(frozen=True, slots=True)
class Policy:
    """How the engine schedules. Every field is a setting declared once, with `knob` (its label,
    help, unit, bounds and who may change it): the stored fleet policy, the policy form, the API,
    the what-if settings and the simulator's tweaks are built from these declarations
    (`policy_settings`; docs/engine.md, "Adding a policy setting")."""

    backfill: bool = knob(
        True,
        "Backfill",
        "Let later, smaller jobs start in idle gaps when they cannot delay the reserved start of the jobs ahead.",
    )
    reservation_depth: int = knob(
        1,
        "Reserved starts",
        "How many waiting jobs have nodes held for their estimated start; 1 is EASY backfill, more is "
        "conservative backfill (fairer to large jobs, fewer gaps to fill).",
        COUNT,
        bounds=(1, 16),
    )
    topology_aware: bool = knob(
        True,
        "Topology-aware placement",
        "Gangs are placed in the narrowest domain that fits, best fit within it.",
        scope=ENGINE,
    )
    preemption: bool = knob(
        True,
        "Preemption",
        "Let higher-priority work, and teams reclaiming their guarantee, evict preemptible jobs.",
    )
    # How long a victim's GPUs take to change hands: it stops (writing a checkpoint, if it does so
    # on preemption) and the job that preempted it starts on them once the grace has passed.
    preemption_grace_s: float = knob(
        30.0,
        "Preemption grace",
        "How long a preempted job has to stop (and to checkpoint, if it does so when told) before the job "
        "that preempted it starts on its GPUs.",
        SECONDS,
        bounds=(0.0, HOUR_S),
    )
    # Eviction only when it pays (see `preemption.credited_wait_s`): the work it destroys must be worth
    # less than the wait it saves the preemptor. A reclaim of loans is credited no more than the
    # preemptor has already waited (rent or buy: limits overstate waits); once it has waited this
    # long, all of that wait (None: never by age). An eviction by priority is credited the wait to
    # its natural start, and past this bound all it has waited (rent or buy): with any cost paid
    # past it, a fifth of the jobs at a higher priority lost 3.0 % of capacity at load 1.07 without
    # checkpoints (docs/benchmarks-history.md, "Evictions by priority priced as rent or buy").
    # Chosen on benchmarks/sim_quotas.py, days 20-30, load 1.07, no checkpoints (lost GPU-h as a
    # share of capacity x window / guarantee violation GPU-h, easy 4,500), when any cost paid past
    # it: 300 s 3.2 % / 5,557; 1,800 s 2.0 % / 7,074; 4 h 0.62 % / 5,389; None 0.61 % / 5,637.
    # Evictions re-run work, which loads the fleet and so raises violations too.
    # Since the reclaim of loans is credited no more than it has waited (rent or buy), the bound
    # only decides when that whole wait counts rather than the wait to the natural start: one hour,
    # chosen with the two bounds below (README, "Reclaim bounds under rent or buy", 2026-12-01).
    reclaim_after_s: float | None = knob(
        3600.0,
        "Evict anyway after waiting",
        "A job evicts running work only when the work lost is worth less than the wait it saves. Once it has "
        "waited this long, taking back another team's loans it evicts anyway (or, with the credit below, "
        "for that many times all it has waited), and a job of higher priority counts all it has waited as "
        "saved. Empty: only the wait to its natural start counts.",
        HOURS,
        bounds=(0.0, MAX_WAIT_S),
    )
    # A reclaim of loans is credited the wait to its natural start, read from time limits, but no
    # more than this many times what the reclaimer has already waited (and past `reclaim_after_s`,
    # that multiple of all it has waited); None: no such bound (any cost past `reclaim_after_s`).
    # 1 is rent or buy: each owner waits about as long as the eviction at last destroys, all of it
    # counted as guarantee violated. None, chosen on benchmarks/sim_quotas.py over 1 (README, "The
    # wait a reclaim is credited: none bounds it"): full trace without checkpoints, violation at
    # load 0.8 45 -> 22 % of easy's (exact limits) and 32 -> 6 % (x2), at load 1.07 43 -> 35 % and
    # 40 -> 36 %, work lost at most 0.62 % of capacity; its price is the evicted work re-run at
    # load 1.07, mean JCT 12.86 -> 13.60 h and 11.90 -> 13.71 h (easy 23.43 / 20.61 h).
    reclaim_wait_credit: float | None = knob(
        None,
        "Credit of a reclaim, times the wait so far",
        "Taking back another team's loans, a job counts as saved the wait until the running work would have "
        "made room anyway (read from time limits, which overstate it), but no more than this many times what "
        "it has already waited. 1: an owner waits about as long as the eviction would destroy. Empty: no "
        "such bound.",
        COUNT,
        bounds=(0.0, 1000.0),
    )
    # A job reclaims loans from other teams (evicts their borrowed work, by the rules above) when
    # at least this share of its size lies within what is left of its team's guarantee, the rest
    # borrowed (1: only a job that fits within it whole; 0: any job of a team with guarantee left,
    # as a 32-GPU gang of a team that has 19 GPUs of guarantee left). Such a partial reclaim takes
    # only loans whose lost work is bounded (they checkpoint periodically or on preemption:
    # `preemption.bounded_loss`, or started within `partial_reclaim_young_s`), and evicts only when
    # the work lost is worth less than the wait of its GPUs within the guarantee.
    # 0.5, chosen on benchmarks/sim_quotas.py (README, "Partial reclaim only of loans that
    # checkpoint"), days 20-30 at load 1.07 with 30-minute checkpoints, exact limits / x2: guarantee
    # violation 2,660 / 2,396 GPU-h at 1, 388 / 408 at 0.5, 141 / 144 at 0 (easy 4,500 / 5,516);
    # mean JCT 4.75 / 4.67 h at 1, 4.91 / 4.87 at 0.5, 5.23 / 5.42 at 0 (easy 5.15 / 4.83); work
    # lost at most 0.16 % of capacity. Without checkpoints 0 and 0.5 planned exactly as 1 (before
    # young loans were taken). Now 0.25, with `reclaim_after_s` 1 h and `partial_reclaim_young_s` 2
    # h (README, "Reclaim bounds under rent or buy", 2026-12-01): the full trace at load 1.07
    # without checkpoints, guarantee violation 15,892 -> 10,911 GPU-h exact (54 -> 37 % of easy's),
    # 14,842 -> 11,549 x2 (47 -> 36 %), mean JCT 13.04 -> 13.53 h and 11.41 -> 12.40 h (easy 23.43 /
    # 20.61), work lost 0.40 -> 0.30 % and 0.60 -> 0.69 % of capacity; at load 0.8 38 -> 31 % x2 but
    # 43 -> 45 % exact (three times the work re-run, on a fleet that frees soon); days 20-30 exact
    # 2,294 -> 1,535 GPU-h (easy 4,500), with 30-minute checkpoints 388 -> 295 at a mean JCT of 4.91
    # -> 4.98 h (easy 5.15); days 40-50 x2 1,101 -> 448 (easy 3,377), exact 978 -> 1,089 (easy
    # 3,183). Share 0 cut as much without checkpoints but fell behind easy on mean JCT with them
    # (5.34 h).
    reclaim_guaranteed_share: float = knob(
        0.25,
        "Reclaim for a job partly within the guarantee",
        "A job larger than what is left of its team's guarantee may still evict other teams' borrowed work "
        "when at least this share of it lies within that guarantee (it borrows the rest): only work that "
        "checkpoints, periodically or when told it is preempted, or that started within the bound for young "
        "loans, so that what it loses is bounded, and only when the work lost is worth less than the wait "
        "it saves its GPUs within the guarantee (never by waiting alone). 0 %: any job of a team with "
        "guarantee left; 100 %: only a job that fits within it whole.",
        PERCENT,
        bounds=(0.0, 1.0),
    )
    # A partial reclaim also takes loans without checkpoints that (re)started at most this long ago
    # (`preemption.partial_reclaim_takes`): they lose at most this much work each, and it is still
    # priced (worth less than the wait of the GPUs within the guarantee). None: only loans that
    # checkpoint. One hour, chosen on benchmarks/sim_quotas.py (README, "Partial reclaim of young
    # loans without checkpoints"), days 20-30 at load 1.07 without checkpoints, exact limits / x2:
    # guarantee violation 3,428 / 3,173 GPU-h with None, 2,294 / 2,009 with 1 h (easy 4,500 /
    # 5,516), work lost 1,807 / 1,393 -> 537 / 871 GPU-h; 10 min cut less (3,169 exact), 4 h and
    # unbounded lost more and fell behind easy on mean JCT (5.16, 5.38 h against 5.15 h). Its price:
    # mean JCT with limits x2 4.97 -> 5.16 h (easy 4.83 h; exact 5.10 -> 5.02 h). Now two hours,
    # chosen with the share and `reclaim_after_s` above (figures there).
    partial_reclaim_young_s: float | None = knob(
        7200.0,
        "Young loans a partial reclaim may take",
        "Such a job may also evict borrowed work that does not checkpoint when it started (or last "
        "restarted) at most this long ago: it loses at most this much work. Empty: only work that "
        "checkpoints.",
        HOURS,
        bounds=(0.0, MAX_WAIT_S),
    )
    fairshare_half_life_s: float = knob(
        7 * DAY_S,
        "Fair-share half-life",
        "How fast past use is forgotten: use this long ago counts half as much as use now.",
        DAYS,
        bounds=(0.1 * DAY_S, 365 * DAY_S),
    )
    # Among a team's jobs of equal fair-share score (without an age weight, all its jobs, after
    # those that waited `max_age_s`; with one, the jobs that all waited `max_age_s`): shortest time
    # limit first cut the p99 JCT in all seven quota replays tried with a weight (exact, x2 and
    # noisy limits; 5.6-29 h) and left the mean within about an hour (docs/benchmarks-history.md,
    # "Within-team order"); without one, see `age_weight`.
    within_team_order: str = knob(
        "shortest_limit",
        "Order within a team",
        "Which of a team's own jobs goes first once priority class and fair share are equal.",
        choices=WITHIN_TEAM_ORDER_LABELS,
    )
    # How much slower a gang runs, by the level of the domain it spans; one knob per level.
    level_penalty: tuple[tuple[str, float], ...] = knob_parts(
        DEFAULT_LEVEL_PENALTY,
        *(
            _penalty_knob(level, label, help)
            for level, label, help in (
                (
                    "node",
                    "Slowdown within one node",
                    "How much slower a gang runs inside one node than ideal; 0 % is full speed.",
                ),
                (
                    "rack",
                    "Slowdown across nodes of one rack",
                    "How much slower a gang runs when its nodes share one rack.",
                ),
                (
                    "pod",
                    "Slowdown across racks of one pod",
                    "How much slower a gang runs when it spans racks of one pod (network spine).",
                ),
                ("fleet", "Slowdown across pods", "How much slower a gang runs when it spans pods."),
            )
        ),
    )
    elastic: bool = knob(
        True,
        "Elastic jobs",
        "Elastic jobs start smaller when they must, shrink before anyone is evicted and grow into idle GPUs.",
        scope=ENGINE,
    )
    gpus_per_node: int = knob(
        8,
        "GPUs per node",
        "The node size planning assumes: a gang larger than this takes whole nodes.",
        COUNT,
        bounds=(1, 1024),
        scope=INTERNAL,
    )
    # Bounds the victim searches of one cycle; later preemptors try again next cycle.
    max_preemption_attempts: int = knob(
        16,
        "Victim searches per cycle",
        "Victim searches one cycle makes; later preemptors try again next cycle.",
        COUNT,
        bounds=(0, 1_000_000),
        scope=INTERNAL,
    )
    # Victim candidates one cycle may look at in total (one search at most a quarter of them), so
    # preemption cost does not grow with the number of running jobs.
    preemption_scan_budget: int = knob(
        8192,
        "Victim candidates per cycle",
        "Running jobs one cycle may look at as victims in total, a quarter of them per search.",
        COUNT,
        bounds=(0, 100_000_000),
        scope=INTERNAL,
    )
    fairshare: bool = knob(
        True,
        "Fair share",
        "With the fair-share order, teams are ordered by their decayed use against their entitlement.",
        scope=ENGINE,
    )
    # Slurm-style age factor added to the fair-share priority (`ordering.order_jobs`). 0 (the
    # default): a team's jobs share its fair-share score, the jobs that waited `max_age_s` first,
    # then `within_team_order` (shortest limit: a team's short jobs do not wait behind its long
    # ones). On sim_quotas at load 1.07 (docs/benchmarks-history.md, "Shortest limit first within a
    # team"), against a weight of 2 over two days: mean JCT lower in all eleven overloaded
    # workloads (by 0.5-2.8 h; 10.93 -> 9.32 h on the full trace without checkpoints), p99 lower in
    # nine (120.5 -> 109.8 h), limit_ratio 0-0.7 points lower (0.930 -> 0.926); its price: guarantee
    # violation up by a tenth to a quarter in eight (down in the three others), p90
    # error of first estimates at load 0.8 up to 1.86 (from 1.19); without quotas (sim_itp, load
    # 0.9) limit_ratio 0.998 -> 0.985 for mean JCT 7.0 -> 6.1 h. An hour's maximum age: 30
    # minutes lost more work with priorities (0.89 % of capacity against 0.60 %), four hours put
    # the estimates at 0.8 past 2x at p90 (2.09), two days left the mean at 10.29 h.
    age_weight: float = knob(
        0.0,
        "Waiting-time weight",
        "Added to a team's fair-share priority (1 = nothing used, 0.5 = used its share) for a job that has "
        "waited the full age below, in proportion before. 0 (the default): a team's jobs share its priority "
        "and go in the order within a team, after those that waited the full age.",
        COUNT,
        bounds=(0.0, 100.0),
        stored_as="fairshare_age_weight",
    )
    max_age_s: float = knob(
        3600.0,
        "Waiting time at full weight",
        "After waiting this long a job gets the whole waiting-time weight; without a weight, it goes ahead "
        "of its team's jobs that waited less; with shortest limit first, ahead of every job that waited less.",
        HOURS,
        bounds=(0.1 * HOUR_S, MAX_WAIT_S),
        stored_as="fairshare_max_age_s",
    )
    # How a priority class is ordered across teams (`ordering.order_jobs`): "fair_share", the
    # fair-share score with age (when `fairshare`), then `within_team_order`; "shortest_limit", the
    # jobs that waited `max_age_s` first, then the shortest time limit whatever the team (fair
    # share between teams is then what their guarantees give them). On sim_quotas at load 1.07
    # shortest limit first cut mean JCT by 2.8-3.6 h (a fifth to a quarter) and p99 by 0.3-26 h, but
    # left about 1 % of the fleet idle more (utilisation 0.961 -> 0.952, limit_ratio 0.931 ->
    # 0.923), and on a held-out sample its guarantee violation rose from 32 to 41 % of easy's:
    # fair share stays the default (docs/benchmarks-history.md, "Queue order across teams"). With
    # `least_borrowed_first` on, the limit_ratio it gives up falls to 0.2-0.7 points, but its first
    # estimates at load 0.8 with exact limits are off by more than 2x at p90 (2.41, 2.54) and on two
    # of three held-out samples it loses more than 1 % of capacity to preemption (README,
    # "Borrowers of the teams that borrow least first").
    queue_order: str = knob(
        "fair_share",
        "Order across teams",
        "Within a priority class: the fair-share score with age, then the order within a team; or the "
        "jobs that waited the maximum age first, then the shortest time limit whatever the team (each "
        "team keeps its guarantee; shorter turnaround at overload, less reliable estimates, a little "
        "less of the fleet used).",
        choices=QUEUE_ORDER_LABELS,
    )
    # While some team has guarantee left, the jobs within their team's guarantee go first, whatever
    # their priority class, and the borrowers after them by class (as Kueue admits within nominal
    # quota before borrowing; README, "Owners of every class before borrowers of any"); with this,
    # within a class the borrowers of the teams that borrow the fewest GPUs of the accelerator as
    # that pass begins go first (a team within its guarantee borrows none), each team's in queue
    # order (as Kueue's fair sharing admits the queue with the lowest share of the borrowed capacity
    # first); off: in queue order.
    # On, chosen on benchmarks/sim_quotas.py (README, "Borrowers of the teams that borrow least
    # first"): on the full trace the guarantee violation fell to 0.2-21 % of easy's in all eight
    # cases (from 1.4-36 %; at load 1.07 without checkpoints 35 -> 20 % exact, 36 -> 21 % x2), mean
    # JCT at load 1.07 by 0.1-2.0 h, and on three held-out half samples the work lost stayed within
    # 1 % of capacity (0.61-0.83 %; off: 0.54-1.53 %); the price is 0.5-1.2 points of limit_ratio at
    # load 1.07 (0.931 -> 0.919 without checkpoints, exact; easy 0.883), the gangs of teams below
    # their guarantee that now borrow first running spread or draining nodes.
    # Among the borrowers of teams that borrow equally little, the job with the larger share of its
    # size within what is left of its team's guarantee goes first (`quota.borrowers_rank`): the
    # unmet guarantee counts while either waits, and the smaller gang collects its GPUs sooner.
    # Measured on benchmarks/sim_quotas.py (README, "Borrowers most within their guarantee first"):
    # in all eight cases the violation fell (load 1.07 without checkpoints 21 -> 21 % / 20 -> 19 % of
    # easy's, with them 10 -> 9 % / 13 -> 11 %) and mean JCT at load 1.07 by 0.4-1.3 h; on three
    # held-out half samples mean JCT 12.8-13.2 -> 11.2-11.5 h, violation 27-34 -> 24-28 %; with the
    # five biggest teams split in two (fifteen teams) 25.8 -> 24.2 % and 14.2 -> 11.2 h. With noisy
    # limits at load 1.07 the violation rose, 20 -> 25.5 %, and mean JCT fell 12.8 -> 10.8 h (with
    # another draw of the noise it fell, 25 -> 19 %).
    least_borrowed_first: bool = knob(
        True,
        "Borrowers of teams that borrow least first",
        "Jobs within their team's guarantee always go first, whatever their priority class; the jobs that "
        "would borrow come after them, by class. On: within a class they go in order of how many GPUs "
        "their team already borrows, fewest first (a team below its guarantee borrows none), and among "
        "equals the job with the larger share of its size within what is left of its team's guarantee "
        "first; off: in queue order. On keeps guarantees better at overload (about half the violations on "
        "the benchmark) for about 1 % of the fleet's goodput.",
    )
    # Once a team's first job that waits in a cycle (for its quota limit or for capacity) has
    # waited this long, it keeps its size within the team's limit, and the team's later jobs are
    # admitted only within the rest, never below its guarantee, as a reservation keeps nodes for a
    # blocked head (`quota.QuotaLedger.hold`; 0: at once, close to Kueue's StrictFIFO). None: they
    # take whatever the team's quota has left (BestEffortFIFO), and a large job of a team at its
    # limit waits until the team's load happens to leave it room. None, chosen on
    # benchmarks/sim_quotas.py with team limits that bind (`--borrow-limit`, days 20-30, load 1.07,
    # no checkpoints, exact; README, "Quota kept for a team's first waiting job"): at a borrow limit
    # of 5 % of the fleet, mean JCT 5.53 h none, 7.22 at once, 6.72 after 6 h or a day, 6.45 after
    # two days (p99 wait 15.3 h none, 48-54 with any); at 10 %, 5.07 none, 5.20-5.58 with any; at
    # 25 % (and the default benchmark, where teams may borrow the whole fleet) the same plans. What
    # a team leaves idle for its held job goes only partly to other teams' loans.
    quota_hold_after_s: float | None = knob(
        None,
        "Keep quota for a team's job waiting longer than",
        "Once the first of a team's waiting jobs (for its quota limit or for free GPUs) has waited this long, "
        "it keeps its size within the team's limit, and the team's later jobs start only within the rest "
        "(always within the guarantee), so a large job is not overtaken for ever by its own team's smaller "
        "ones; what the team leaves idle meanwhile is lent to other teams. Empty: later jobs take whatever "
        "the team's quota has left.",
        HOURS,
        bounds=(0.0, MAX_WAIT_S),
    )
    # Of the GPUs another team lends (its unused guarantee, up to its lend limit), a team takes at
    # most this share ("share of a lender", `quota.loans_within_shares`, checked by
    # `QuotaLedger.admit` at every loan): no team borrows all of one lender's idle guarantee, so a
    # lender's other borrowers keep room. What nobody is guaranteed is shared by no such bound.
    # None (the default): a loan is bounded only by the pool and the borrower's limit.
    max_share_of_lender: float | None = knob(
        None,
        "Most a team borrows of one lender",
        "A team may take at most this share of the GPUs any other team lends (its unused guarantee), "
        "so that one borrower never takes all of one team's idle GPUs. Capacity nobody is guaranteed "
        "is not bounded by it. Empty: no bound but the lendable pool and the team's borrow limit.",
        PERCENT,
        bounds=(0.01, 1.0),
    )
    # A multi-node gang waits for the narrowest domain an empty fleet offers its size (a rack, if
    # one is big enough) for this long before taking a wider placement (at once when no such
    # domain frees within the horizon); None: it always waits. A week, chosen on the ITP and quota
    # replays (docs/benchmarks-history.md, "Gang patience"): there it never fired and matched "always
    # wait", the best on limit_ratio, mean and p99 JCT; a day spread gangs that a rack would have
    # taken soon after (sim_quotas --quick: limit_ratio 0.918 -> 0.910, mean JCT 8.90 -> 9.35 h),
    # spreading at once cost most (0.903, 9.54 h). A bound still serves racks that never free.
    gang_spread_after_s: float | None = knob(
        7 * DAY_S,
        "Gangs wait for one domain for at most",
        "How long a multi-node gang waits for the narrowest domain that can hold it (usually one rack) "
        "before it may be spread wider; at once if none frees within 30 days. Empty: it always waits.",
        HOURS,
        bounds=(0.0, MAX_WAIT_S),
    )
    # The same bound for a gang of a team that uses less than its guarantee as the cycle begins
    # (the lower of the two applies; None: such gangs wait as any other). While it waits for a rack,
    # its team's unused guarantee is lent out and counted as violated. Spreading at once (rather
    # than after an hour) cut the guarantee violation of benchmarks/sim_quotas.py days 20-30 at load
    # 1.07 without checkpoints from 6,772 to 3,428 GPU-h (easy 4,500) with the rent-or-buy pricing
    # (6,102 to 3,370 before it) and the work lost on --quick from 0.88 % to 0.10 % of capacity, at
    # a mean JCT of 5.10 h instead of 4.68 h there (easy 5.15 h): still ahead of easy on
    # limit_ratio, mean and p99 JCT (docs/benchmarks-history.md, "Gangs of a team below its guarantee").
    guarantee_spread_after_s: float | None = knob(
        0.0,
        "Gangs of a team below its guarantee wait for at most",
        "The same bound for a gang of a team that uses less than its guarantee: while it waits for one "
        "domain, its team's unused guarantee is lent to others. The shorter of the two applies; 0: such a "
        "gang takes the first placement it can get. Empty: it waits as any other gang.",
        HOURS,
        bounds=(0.0, MAX_WAIT_S),
    )
    # The same bound for a gang a node failure requeued (`Job.requeued_by_failure`; the lowest bound
    # that applies wins; None: it waits as any other gang). Its rack has just lost a node, so a rack
    # with enough whole nodes can take hours to free; meanwhile the interrupted work stands still.
    # 0, chosen on benchmarks/failures.py (ITP, first 3,000 jobs, load 0.6, 50 GB/s, 346 failures):
    # with the patience of any gang (a week) the restarted gangs waited 389 s on average in the
    # queue (32-GPU gangs 1,305 s, up to 5 h for a rack; going first alone: 405 s, the queue being
    # mostly empty), MTTR 482 s; with 0, 83 s (32-GPU gangs 86 s), MTTR 175 s, goodput 0.514 ->
    # 0.515, mean JCT 7.38 h both; failure losses 859 -> 1,008 GPU-h (326 restarts, not 315: gangs
    # back sooner are caught by more failures). Without failures no job has the flag: plans unchanged.
    failure_spread_after_s: float | None = knob(
        0.0,
        "Gangs requeued by a node failure wait for one domain for at most",
        "The same bound for a gang a node failure interrupted: it gets its place back ahead of new work, "
        "and takes the first placement it can get after this long. The shortest bound that applies wins. "
        "Empty: it waits as any other gang.",
        HOURS,
        bounds=(0.0, MAX_WAIT_S),
        scope=ENGINE,
    )

    @classmethod
    def fifo(cls) -> Policy:
        """Strict FIFO gang scheduling: the blocked head holds back everyone behind it."""
        return cls(
            backfill=False,
            topology_aware=False,
            preemption=False,
            elastic=False,
            fairshare=False,
            within_team_order="submit",
            least_borrowed_first=False,
        )

    @classmethod
    def easy(cls) -> Policy:
        """EASY backfill: one reservation for the head, first-fit placement, no preemption."""
        return cls(
            backfill=True,
            reservation_depth=1,
            topology_aware=False,
            preemption=False,
            elastic=False,
            fairshare=False,
            within_team_order="submit",
            least_borrowed_first=False,
        )

    def penalty(self, level: str) -> float:
        for name, factor in self.level_penalty:
            if name == level:
                return factor
        return 1.0


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The fleet as one cycle sees it: plain data, equal snapshots plan alike. What the fast path
    keeps from one cycle to the next travels beside it (`kept.Kept`, from `FleetState.kept()`)."""

    nodes: tuple[Node, ...]
    running: tuple[Running, ...]
    pending: tuple[Job, ...]
    teams: tuple[Team, ...]
    quotas: tuple[Quota, ...]
    policy: Policy
    usage: tuple[tuple[str, float], ...] = ()
