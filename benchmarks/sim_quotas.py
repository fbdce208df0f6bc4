"""Scheduling under quotas: the ten ITP clusters (or Philly's 14 teams) with guarantees, under every policy.

    python3 benchmarks/sim_quotas.py [--trace itp|philly] [--traces PATH] [--load 0.8 --load 1.07]
        [--checkpoint none --checkpoint 30m]
        [--estimate exact --estimate 2 --estimate noisy2] [--policy fifo|easy|fleetline|sjf-oracle ...]
        [--order submit|shortest_limit|las ...] [--reclaim-share SHARE ...] [--tweak FIELD=VALUE[,...] ...]
        [--limit N] [--window START_DAY:DAYS] [--sample FRACTION] [--seed N] [--split-teams N]
        [--guarantee-skew FACTOR] [--priority-share SHARE] [--borrow-limit SHARE] [--tick SECONDS]
        [--quick] > out.json

Each team is guaranteed a share of the fleet proportional to its demand (GPU-seconds offered), the
guarantees adding up to about 90 % of the fleet, and may borrow up to the whole fleet. A case is one
fleet size (`--load`: offered load, the fleet sized as in `sim_itp.py`), one checkpoint setting
(`none`, as in most production traces, or `30m`: every job checkpoints every 30 minutes of work) and
one estimate setting (`exact`: time limits are the true durations; `2`: twice the duration;
`noisy2`: the duration times a factor drawn per job between 1 and 4, log-uniformly, so that its
median is 2 and it reorders jobs, seeded by `--seed`). Every case replays every policy; `sjf-oracle`
(shortest true duration first, no quotas, no preemption) is the unfair bound. `--order` adds
fleetline with other within-team orders (named `fleetline[order=...]`), `--reclaim-share` with
another `Policy.reclaim_guaranteed_share` (named `fleetline[reclaim_share=...]`), `--tweak` with any
fields of the engine's `Policy` changed (`--tweak guarantee_spread_after_s=none`, named
`fleetline[guarantee_spread_after_s=none]`; on/off for a flag, none for an unset bound).

`--trace philly` replays the Philly slice of late 2017 instead (`jobs.csv` in the canonical format,
30,138 jobs, half of them shorter than 10 minutes, a few 64-128-GPU gangs), its 14 teams the trace's
own virtual clusters, with the same cases and guarantees. Neither trace ships with the project:
`--traces` (or `FLEETLINE_ITP_TRACES` / `FLEETLINE_PHILLY_TRACE`) names the ITP directory or
Philly's `jobs.csv`; by default both are read from `../shared/traces`.

Replays plan as the live cycle does, on ticks of 60 s of fleet time (`--tick`; the live cycle ticks
every `FLEET_CYCLE_INTERVAL_S` = 1 s at `FLEET_CLOCK_SPEED` = 60): what arrives or ends between two
ticks is planned together at the next. `--tick 0` plans at every instant something changes.

Prints JSON on stdout: per case its setting, fleet and quotas, one metrics object per policy (every
key of the metrics contract, including `preemption_lost_gpu_hours`, `guarantee_violation_gpu_hours`
and `sim_wall_s`, the replay time, plus `replay_cpu_s`, the CPU time of the replay, which a busy
shared box inflates less), and the issue's "done when" checks of fleetline against easy.
A table per case goes to stderr. A replay that stalls is reported as an error, not a crash.

Quick runs: `--quick` (the first 3,000 jobs, fleetline and easy, one case) takes well under a
minute; `--limit N` or `--window 20:10` (days 20 to 30) pick part of the trace, `--sample 0.5
--seed 3` keeps a seeded half of the jobs (another workload of the same shape; the fleet is sized
for it).

Workloads of another shape, for a policy not to be tuned to this one: `--split-teams 5` splits the
five teams that offer the most work in two each, by a hash of the job id (fifteen teams, each with a
smaller guarantee, which fewer of its gangs fit); `--guarantee-skew 3` makes guarantees no longer
proportional to demand: each team's is multiplied by a factor drawn log-uniformly between 1/3 and 3
(seeded by `--seed`), the guarantees still adding up to the same total, so that some teams borrow
all the time and others own more than they use. `--priority-share 0.2` puts a seeded fifth of the
jobs in a higher priority class (priority 10, the rest 0), which may preempt the others: each
policy's results then also hold the mean and p99 JCT of those jobs (`jct_mean_s_high`,
`jct_p99_s_high`).

`--borrow-limit 0.25` lets each team borrow at most a quarter of the fleet beyond its guarantee (but
always enough for its largest job), so that team limits bind, as they do on a real fleet where a
team's quota is guarantee plus a borrow limit (the live demo's teams borrow at most half their
guarantee): what `Policy.quota_hold_after_s` (a team's first waiting job keeps its size within
the team's limit) is for.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import random
import subprocess
import sys
import time
import zlib
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from engine_cycle import calibrate_ms  # noqa: E402

from scheduling.engine import Policy, policy_settings  # noqa: E402
from scheduling.engine.model import WITHIN_TEAM_ORDERS  # noqa: E402
from scheduling.sim.fleet import Fleet, QuotaSpec  # noqa: E402
from scheduling.sim.formulas import mean, percentile  # noqa: E402
from scheduling.sim.metrics import CONTRACT_KEYS  # noqa: E402
from scheduling.sim.progress import ProgressBar  # noqa: E402
from scheduling.sim.runner import PRESETS, Preset, compare_policies  # noqa: E402
from scheduling.sim.simulator import SimulationStalled  # noqa: E402
from scheduling.sim.sizing import demand_by_team, fleet_for_load, quotas_by_demand  # noqa: E402
from scheduling.sim.trace import TraceJob, load_canonical, load_itp  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_TRACES = ROOT.parent / "shared" / "traces" / "itp"
DEFAULT_PHILLY = ROOT.parent / "shared" / "traces" / "philly-late2017" / "jobs.csv"
# The trace's path when `--traces` is not given: an environment variable, else ../shared/traces.
TRACE_PATHS = {
    "itp": ("FLEETLINE_ITP_TRACES", DEFAULT_TRACES),
    "philly": ("FLEETLINE_PHILLY_TRACE", DEFAULT_PHILLY),
}
LOADS = (0.8, 1.07)
CHECKPOINTS = {"none": None, "30m": 1800.0}
ESTIMATES = ("exact", "2")
POLICIES = ("fifo", "easy", "fleetline", "sjf-oracle")
GUARANTEED_SHARE = 0.9
HIGH_PRIORITY = 10  # the priority of the jobs `--priority-share` picks (the others keep 0)
NOISY_PREFIX = "noisy"
QUICK_LIMIT = 3000
TICK_S = 60.0  # the live cycle's tick in fleet time at its default settings
# The "done when", fleetline against easy in every case.
LOST_SHARE_MAX = 0.01
VIOLATION_SHARE_MAX = 0.25
ESTIMATE_P90_MAX = 2.0
REPLAY_S_MAX = 45.0
TABLE = (
    ("limit_ratio", "limit", 1.0, "{:.3f}"),
    ("goodput", "goodput", 1.0, "{:.3f}"),
    ("jct_mean_s", "JCT h", 3600.0, "{:.2f}"),
    ("jct_p99_s", "p99 h", 3600.0, "{:.1f}"),
    ("wait_mean_s", "wait h", 3600.0, "{:.2f}"),
    ("jct_mean_s_high", "hi JCT h", 3600.0, "{:.2f}"),
    ("jct_p99_s_high", "hi p99 h", 3600.0, "{:.1f}"),
    ("jain_fairness", "Jain", 1.0, "{:.3f}"),
    ("preemptions", "preempt", 1.0, "{:.0f}"),
    ("preemption_lost_gpu_hours", "lost GPU-h", 1.0, "{:.0f}"),
    ("guarantee_violation_gpu_hours", "viol GPU-h", 1.0, "{:.0f}"),
    ("guarantee_violation_fit_gpu_hours", "fit viol", 1.0, "{:.0f}"),
    ("fragmentation_idle_fraction", "frag", 1.0, "{:.3f}"),
    ("topology_optimal_fraction", "topo", 1.0, "{:.3f}"),
    ("estimate_error_p50", "est p50", 1.0, "{:.2f}"),
    ("estimate_error_p90", "est p90", 1.0, "{:.2f}"),
    ("estimate_absent", "est none", 1.0, "{:.0f}"),
    ("sim_wall_s", "replay s", 1.0, "{:.1f}"),
    ("replay_cpu_s", "CPU s", 1.0, "{:.1f}"),
)


def load_itp_dir(path: Path) -> list[TraceJob]:
    """The ITP clusters of a directory (`cluster*.csv`), each file one team."""
    files = sorted(path.glob("cluster*.csv"))
    if not files:
        raise SystemExit(f"no ITP trace files (cluster*.csv) in {path}: pass --traces DIR")
    return load_itp(files)


def load_philly(path: Path) -> list[TraceJob]:
    """Philly's jobs in the canonical format (`job_id, submit_time, duration, gpus, team`), the team
    each job's virtual cluster; a directory is read as its `jobs.csv`. A file without jobs or with a
    single team is refused: the case is about several teams sharing a fleet."""
    if path.is_dir():
        path = path / "jobs.csv"
    if not path.is_file():
        raise SystemExit(f"no Philly trace at {path}: pass --traces FILE (or set FLEETLINE_PHILLY_TRACE)")
    trace = load_canonical([path])
    teams = {job.team for job in trace}
    if len(teams) < 2:
        raise SystemExit(f"{path}: {len(trace)} jobs in {len(teams)} team(s); the quota case needs two or more")
    return trace


def load_trace(name: str, path: Path | None) -> list[TraceJob]:
    """The named trace, from `path` or its default place (`TRACE_PATHS`)."""
    variable, default = TRACE_PATHS[name]
    if path is None:
        path = Path(os.environ.get(variable) or default)
    return load_itp_dir(path) if name == "itp" else load_philly(path)


def select(trace: list[TraceJob], options: argparse.Namespace) -> list[TraceJob]:
    """The part of the merged trace a run replays: a time window, a seeded sample, the first N."""
    if options.window:
        start_day, days = (float(part) for part in options.window.split(":"))
        lo = trace[0].submit_s + start_day * 86400.0
        trace = [job for job in trace if lo <= job.submit_s < lo + days * 86400.0]
    if options.sample < 1.0:
        rng = random.Random(options.seed)
        trace = [job for job in trace if rng.random() < options.sample]
    if options.limit:
        trace = trace[: options.limit]
    if len(trace) < 2:
        raise SystemExit("the selection holds fewer than two jobs")
    return prioritised(split_teams(trace, options.split_teams), options.priority_share, options.seed)


def split_teams(trace: list[TraceJob], count: int) -> list[TraceJob]:
    """The `count` teams offering the most GPU-seconds split in two (`team-a`, `team-b`) by a hash of
    the job id: the same jobs, more and smaller teams."""
    demand = demand_by_team(trace)
    split = set(sorted(demand, key=lambda team: (-demand[team], team))[:count])
    return [
        replace(job, team=f"{job.team}-{'ab'[zlib.crc32(job.job_id.encode()) % 2]}") if job.team in split else job
        for job in trace
    ]


def prioritised(trace: list[TraceJob], share: float, seed: int) -> list[TraceJob]:
    """A seeded `share` of the jobs in the higher priority class (`HIGH_PRIORITY`)."""
    if share <= 0.0:
        return trace
    rng = random.Random(f"{seed}:priority")
    return [replace(job, priority=HIGH_PRIORITY) if rng.random() < share else job for job in trace]


def high_priority_jct(jobs: list[TraceJob], jct_by_job: dict[str, float]) -> dict[str, float | None]:
    """Mean and p99 JCT of the finished jobs of the higher priority class (nothing without any)."""
    jcts = [jct_by_job[job.job_id] for job in jobs if job.priority == HIGH_PRIORITY and job.job_id in jct_by_job]
    if not jcts:
        return {}
    return {"jct_mean_s_high": mean(jcts), "jct_p99_s_high": percentile(jcts, 99)}


def skewed(quotas: QuotaSpec, factor: float, seed: int) -> QuotaSpec:
    """Each guarantee multiplied by a factor drawn log-uniformly in [1/factor, factor] (seeded), the
    total kept (each rounded down to whole GPUs), borrowing up to the whole fleet as before."""
    if factor <= 1.0:
        return quotas
    rng = random.Random(f"{seed}:guarantee-skew")
    weights = [quota.guaranteed * factor ** rng.uniform(-1.0, 1.0) for quota in quotas.quotas]
    total, drawn = sum(quota.guaranteed for quota in quotas.quotas), sum(weights) or 1.0
    changed = []
    for quota, weight in zip(quotas.quotas, weights, strict=True):
        guaranteed = int(total * weight / drawn)
        capacity = quota.guaranteed + quota.borrow_limit
        changed.append(replace(quota, guaranteed=guaranteed, borrow_limit=capacity - guaranteed))
    return replace(quotas, quotas=tuple(changed))


def limited(quotas: QuotaSpec, share: float | None, trace: list[TraceJob], capacity: int) -> QuotaSpec:
    """Each team's borrow limit `share` of the fleet (None: as before, the whole fleet), but never
    below what its largest job needs beyond its guarantee: every job can still start."""
    if share is None:
        return quotas
    largest: dict[str, int] = {}
    for job in trace:
        largest[job.team] = max(largest.get(job.team, 0), job.gpus)
    changed = [
        replace(quota, borrow_limit=max(int(share * capacity), largest.get(quota.team, 0) - quota.guaranteed, 0))
        for quota in quotas.quotas
    ]
    return replace(quotas, quotas=tuple(changed))


def shaped(trace: list[TraceJob], checkpoint_s: float | None, estimate: str, seed: int) -> list[TraceJob]:
    """The trace with the case's checkpoints and, for `noisyF`, per-job time limits."""
    if checkpoint_s is not None:
        trace = [replace(job, checkpoint_interval_s=checkpoint_s) for job in trace]
    if estimate.startswith(NOISY_PREFIX):
        factor = float(estimate[len(NOISY_PREFIX) :])
        rng = random.Random(f"{seed}:{estimate}")
        # log-uniform between 1 and factor**2: median `factor`
        trace = [replace(job, time_limit_s=max(1.0, job.duration_s * factor ** (2.0 * rng.random()))) for job in trace]
    return trace


def variants(orders: list[str], shares: list[float]) -> dict[str, Preset]:
    """fleetline with another within-team order, named `fleetline[order=...]`, or another
    `reclaim_guaranteed_share`, named `fleetline[reclaim_share=...]`."""
    by_order = {
        f"fleetline[order={order}]": Preset(lambda order=order: replace(Policy(), within_team_order=order))
        for order in orders
    }
    by_share = {
        f"fleetline[reclaim_share={share:g}]": Preset(
            lambda share=share: replace(Policy(), reclaim_guaranteed_share=share)
        )
        for share in shares
    }
    return by_order | by_share


def variant_names(options: argparse.Namespace) -> list[str]:
    orders = [f"fleetline[order={order}]" for order in options.order or []]
    shares = [f"fleetline[reclaim_share={share:g}]" for share in options.reclaim_share or []]
    return orders + shares + [f"fleetline[{tweak}]" for tweak in options.tweak or []]


def tweaked(tweak: str) -> Preset:
    """fleetline with the policy fields of `tweak` ("field=value,field=value") changed; a value is
    read as the field's default is typed (on/off for a flag, "none" for an unset bound)."""
    changes: dict[str, object] = {}
    for part in tweak.split(","):
        name, _, text = part.partition("=")
        if not text:
            raise SystemExit(f"--tweak {tweak}: {part!r} is not FIELD=VALUE of the engine's Policy")
        try:
            changes[name] = policy_settings.parse_text(name, text)
        except ValueError as error:
            raise SystemExit(f"--tweak {tweak}: {error}") from None
    return Preset(lambda: policy_settings.policy_with(Policy(), changes))


def run_case(
    trace: list[TraceJob], load: float, checkpoint: str, estimate: str, policies: list[str], options: argparse.Namespace
) -> dict[str, Any]:
    fleet = fleet_for_load(trace, load)
    quotas = quotas_by_demand(trace, fleet, guaranteed_share=GUARANTEED_SHARE)
    quotas = skewed(quotas, options.guarantee_skew, options.seed)
    quotas = limited(quotas, options.borrow_limit, trace, fleet.capacity_gpus)
    jobs = shaped(trace, CHECKPOINTS[checkpoint], estimate, options.seed)
    factor = None if estimate == "exact" or estimate.startswith(NOISY_PREFIX) else float(estimate)
    extra = variants(options.order or [], options.reclaim_share or [])
    extra |= {f"fleetline[{tweak}]": tweaked(tweak) for tweak in getattr(options, "tweak", None) or []}
    results: list[dict[str, Any]] = []
    meta: dict[str, Any] = {}
    for name in policies:
        label = f"{load:g}/{checkpoint}/{estimate} {name}"
        cpu_start = time.process_time()
        try:
            comparison = compare_policies(
                jobs,
                fleet,
                [name],
                quotas=quotas,
                estimate=factor,
                seed=options.seed,
                tick_s=options.tick,
                progress=lambda _name, label=label: ProgressBar(label[:40]),
                variants=extra,
            )
        except SimulationStalled as stalled:
            sys.stderr.write(f"\n{label}: {stalled}\n")
            results.append({"policy": name, "error": str(stalled)})
            continue
        meta = comparison.meta
        # CPU time as well as wall time: on a shared box the wall time of a replay varies with the load.
        cpu_s = time.process_time() - cpu_start
        result = comparison.results[0]
        results.append({**result.metrics, **high_priority_jct(jobs, result.jct_by_job), "replay_cpu_s": cpu_s})
    return {
        "case": f"load {load:g}, checkpoints {checkpoint}, estimate {estimate}",
        "load": load,
        "checkpoint": checkpoint,
        "estimate": estimate,
        "fleet": fleet.describe(),
        "capacity_gpus": fleet.capacity_gpus,
        "jobs": meta.get("jobs"),
        "dropped_jobs": meta.get("dropped_jobs"),
        "quotas": [{"team": q.team, "guaranteed": q.guaranteed, "borrow_limit": q.borrow_limit} for q in quotas.quotas],
        "guaranteed_gpus": sum(q.guaranteed for q in quotas.quotas),
        "results": results,
        "checks": checks(results, fleet),
    }


def checks(results: list[dict[str, Any]], fleet: Fleet) -> dict[str, Any] | None:
    """The issue's "done when" for fleetline against easy in this case (None without both)."""
    by_name = {result["policy"]: result for result in results if "error" not in result}
    ours, easy = by_name.get("fleetline"), by_name.get("easy")
    if ours is None or easy is None:
        return None
    area_h = fleet.capacity_gpus * ours["window_s"] / 3600.0
    p90 = ours["estimate_error_p90"]
    return {
        "limit_ratio_ahead_of_easy": ours["limit_ratio"] > easy["limit_ratio"],
        "jct_mean_ahead_of_easy": ours["jct_mean_s"] < easy["jct_mean_s"],
        "jct_p99_ahead_of_easy": ours["jct_p99_s"] < easy["jct_p99_s"],
        "preemption_lost_share_of_capacity": ours["preemption_lost_gpu_hours"] / area_h if area_h else None,
        "preemption_lost_within_1_percent": ours["preemption_lost_gpu_hours"] <= LOST_SHARE_MAX * area_h,
        "violation_share_of_easy": (
            ours["guarantee_violation_gpu_hours"] / easy["guarantee_violation_gpu_hours"]
            if easy["guarantee_violation_gpu_hours"]
            else None
        ),
        "violation_within_25_percent_of_easy": ours["guarantee_violation_gpu_hours"]
        <= VIOLATION_SHARE_MAX * easy["guarantee_violation_gpu_hours"],
        # The same bar on the demand that fits as whole jobs (`guarantee_violation_fit_gpu_hours`).
        "fit_violation_share_of_easy": (
            ours["guarantee_violation_fit_gpu_hours"] / easy["guarantee_violation_fit_gpu_hours"]
            if easy["guarantee_violation_fit_gpu_hours"]
            else None
        ),
        "fit_violation_within_25_percent_of_easy": ours["guarantee_violation_fit_gpu_hours"]
        <= VIOLATION_SHARE_MAX * easy["guarantee_violation_fit_gpu_hours"],
        "replay_cpu_s": ours.get("replay_cpu_s"),
        "estimate_p90_within_2": p90 is not None and p90 <= ESTIMATE_P90_MAX,
        "estimates_absent": ours["estimate_absent"],
        # CPU time of the replay (wall time on a shared box varies with the other work).
        "replay_within_45_s": ours.get("replay_cpu_s", ours["sim_wall_s"]) <= REPLAY_S_MAX,
    }


def table(case: dict[str, Any]) -> str:
    head = f"{'policy':<32}" + "".join(f"{label:>11}" for _, label, _, _ in TABLE)
    lines = [f"{case['case']}: {case['fleet']} = {case['capacity_gpus']} GPUs, {case['jobs']} jobs", head]
    for result in case["results"]:
        if "error" in result:
            lines.append(f"{result['policy']:<32} stalled: {result['error'][:80]}")
            continue
        cells = []
        for key, _, scale, fmt in TABLE:
            value = result.get(key)
            cells.append(f"{'-':>11}" if value is None else f"{fmt.format(value / scale):>11}")
        lines.append(f"{result['policy']:<32}" + "".join(cells))
    return "\n".join(lines)


def revision() -> dict[str, Any]:
    """The commit measured, and whether the engine or simulator had uncommitted changes."""

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False)
        return done.stdout.strip()

    return {
        "commit": git("rev-parse", "--short", "HEAD"),
        "commit_time": git("log", "-1", "--format=%cI"),
        "uncommitted_engine_or_sim": bool(git("status", "--porcelain", "scheduling/engine", "scheduling/sim")),
    }


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", choices=sorted(TRACE_PATHS), default="itp", help="the workload (default itp)")
    parser.add_argument(
        "--traces",
        type=Path,
        help="the ITP directory or Philly's jobs.csv (default: $FLEETLINE_ITP_TRACES / $FLEETLINE_PHILLY_TRACE, "
        "else ../shared/traces)",
    )
    parser.add_argument("--load", type=float, action="append", help="offered load (repeatable; default 0.8 and 1.07)")
    parser.add_argument("--checkpoint", action="append", choices=sorted(CHECKPOINTS), help="repeatable")
    parser.add_argument("--estimate", action="append", help="exact, a factor like 2, or noisyF (repeatable)")
    parser.add_argument("--policy", action="append", choices=sorted(PRESETS), help="repeatable")
    parser.add_argument("--order", action="append", choices=WITHIN_TEAM_ORDERS, help="add fleetline with this order")
    parser.add_argument(
        "--reclaim-share", type=float, action="append", help="add fleetline with this reclaim_guaranteed_share"
    )
    parser.add_argument(
        "--tweak", action="append", help="add fleetline with these Policy fields changed: FIELD=VALUE[,FIELD=VALUE]"
    )
    parser.add_argument("--limit", type=int, help="only the first N jobs (by submit time) of the selection")
    parser.add_argument("--window", help="START_DAY:DAYS of the merged trace")
    parser.add_argument("--sample", type=float, default=1.0, help="keep this fraction of the jobs (seeded)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--split-teams", type=int, default=0, help="split the N teams offering the most work in two")
    parser.add_argument(
        "--guarantee-skew", type=float, default=1.0, help="guarantees times a seeded factor in [1/F, F], same total"
    )
    parser.add_argument(
        "--priority-share", type=float, default=0.0, help=f"this share of the jobs at priority {HIGH_PRIORITY}"
    )
    parser.add_argument(
        "--borrow-limit", type=float, help="each team borrows at most this share of the fleet (default: all of it)"
    )
    parser.add_argument(
        "--tick", type=float, default=TICK_S, help="plan on ticks of this many fleet seconds (0: at every event)"
    )
    parser.add_argument("--quick", action="store_true", help=f"first {QUICK_LIMIT} jobs, easy and fleetline, one case")
    options = parser.parse_args(argv)
    if options.quick:
        options.limit = options.limit or QUICK_LIMIT
        options.load = options.load or [LOADS[1]]
        options.checkpoint = options.checkpoint or ["none"]
        options.estimate = options.estimate or ["exact"]
        options.policy = options.policy or ["easy", "fleetline"]
    if options.split_teams < 0:
        parser.error(f"--split-teams {options.split_teams}: a number of teams, 0 or more")
    if not 1.0 <= options.guarantee_skew < math.inf:
        parser.error(f"--guarantee-skew {options.guarantee_skew}: a factor of at least 1")
    if not 0.0 <= options.priority_share <= 1.0:
        parser.error(f"--priority-share {options.priority_share}: a share between 0 and 1")
    if options.borrow_limit is not None and not 0.0 <= options.borrow_limit <= 1.0:
        parser.error(f"--borrow-limit {options.borrow_limit}: a share of the fleet between 0 and 1")
    if not 0.0 <= options.tick < math.inf:
        parser.error(f"--tick {options.tick}: a number of seconds, 0 or more")
    for estimate in options.estimate or ():
        if estimate != "exact" and not estimate.startswith(NOISY_PREFIX):
            factor = float(estimate)
            if not factor >= 1.0 or math.isinf(factor):
                parser.error(f"--estimate {estimate}: a factor must be at least 1")
    return options


def main(argv: list[str] | None = None) -> int:
    options = parse(argv)
    started = time.time()
    trace = select(load_trace(options.trace, options.traces), options)
    policies = list(dict.fromkeys((options.policy or list(POLICIES)) + variant_names(options)))
    cases = []
    settings = itertools.product(
        options.load or LOADS, options.checkpoint or list(CHECKPOINTS), options.estimate or ESTIMATES
    )
    for load, checkpoint, estimate in settings:
        case = run_case(trace, load, checkpoint, estimate, policies, options)
        sys.stderr.write(table(case) + "\n\n")
        cases.append(case)
    output = {
        "meta": {
            **revision(),
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(started)),
            "wall_s": time.time() - started,
            # The box's speed (engine_cycle.py's fixed workload): replay times compare across boxes
            # only with it.
            "calibration_ms": calibrate_ms(),
            "trace": options.trace,
            "trace_jobs": len(trace),
            "limit": options.limit,
            "window": options.window,
            "sample": options.sample,
            "seed": options.seed,
            "split_teams": options.split_teams,
            "guarantee_skew": options.guarantee_skew,
            "priority_share": options.priority_share,
            "borrow_limit": options.borrow_limit,
            "tick_s": options.tick,
            "guaranteed_share": GUARANTEED_SHARE,
            "contract_keys": list(CONTRACT_KEYS),
        },
        "cases": cases,
    }
    print(json.dumps(output, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
