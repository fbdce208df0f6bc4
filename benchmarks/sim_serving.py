"""Serving and training on one fleet: what sharing buys over a static split, and what it costs training.

    python3 benchmarks/sim_serving.py [--share 0.2 --share 0.4] [--checkpoint none --checkpoint on-preempt]
        [--layout static-peak|static-mean|shared ...] [--load 0.8] [--window START_DAY:DAYS]
        [--limit N] [--quick] > out.json

The ten ITP clusters are the training trace (one team per cluster), on a fleet sized for an offered
training load of `--load` (as `sim_itp.py` sizes it). Serving is six generated deployments of
different replica sizes (1 to 16 GPUs) whose diurnal curves peak at different hours (trough at 30 %
of peak), scaled so that together they ask for about `--share` of the fleet at their joint peak;
each must serve within 300 s of the demand asking for a replica. They run over the training
trace's window.

A case is one serving share and one checkpoint setting: `none` (a preempted job loses all its work
since it started) or `on-preempt` (every job checkpoints every 30 minutes of work and when it is
told it is preempted, so a preemption costs it only the grace period). Each case replays three
layouts with the same engine under the fleetline policy: `static-peak` (serving gets whole nodes
enough for its joint peak, training the rest: the common practice), `static-mean` (enough for its
mean demand) and `shared` (one fleet, serving first, training absorbing what is left).

Prints JSON on stdout: per case the deployments, the demand profile, and one metrics object per
layout (the metrics contract, including the serving keys, plus training-only JCT and the share of
training's GPU-hours lost to serving), and the issue's aims checked on the shared fleet. A table per
case goes to stderr.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scheduling.engine import Job  # noqa: E402
from scheduling.engine.demand import DiurnalDemand  # noqa: E402
from scheduling.engine.serving import Deployment  # noqa: E402
from scheduling.sim.formulas import mean, percentile  # noqa: E402
from scheduling.sim.metrics import CONTRACT_KEYS  # noqa: E402
from scheduling.sim.serving import LAYOUTS, demand_profile, simulate_serving  # noqa: E402
from scheduling.sim.simulator import SimulationStalled  # noqa: E402
from scheduling.sim.sizing import fleet_for_load  # noqa: E402
from scheduling.sim.trace import TraceJob, load_itp  # noqa: E402
from scheduling.sim.workload import build_workload  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_TRACES = ROOT.parent / "shared" / "traces" / "itp"
SHARES = (0.2, 0.4)
CHECKPOINTS = ("none", "on-preempt")
CHECKPOINT_INTERVAL_S = 1800.0
TROUGH = 0.3
SLO_S = 300.0
QUICK_LIMIT = 3000
# (name, GPUs per replica, peak hour, part of serving's peak)
SHAPES: tuple[tuple[str, int, float, float], ...] = (
    ("chat-large", 16, 14.0, 0.30),
    ("chat", 8, 15.0, 0.25),
    ("search", 4, 11.0, 0.15),
    ("vision", 8, 19.0, 0.12),
    ("embed", 2, 13.0, 0.10),
    ("speech", 1, 10.0, 0.08),
)
# The aims, on the shared fleet.
ATTAINMENT_MIN = 0.999
UTILISATION_GAIN_MIN = 0.15
LOST_SHARE_MAX = 0.02
TABLE = (
    ("serving_slo_attainment", "attain", 1.0, "{:.4f}"),
    ("serving_start_p99_s", "start p99 s", 1.0, "{:.0f}"),
    ("utilisation", "util", 1.0, "{:.3f}"),
    ("serving_utilisation", "util srv", 1.0, "{:.3f}"),
    ("training_utilisation", "util trn", 1.0, "{:.3f}"),
    ("goodput", "goodput", 1.0, "{:.3f}"),
    ("serving_goodput", "good srv", 1.0, "{:.3f}"),
    ("training_goodput", "good trn", 1.0, "{:.3f}"),
    ("training_preemptions_by_serving", "preempt", 1.0, "{:.0f}"),
    ("training_lost_gpu_hours_by_serving", "lost GPU-h", 1.0, "{:.0f}"),
    ("training_lost_share_by_serving", "lost %", 0.01, "{:.2f}"),
    ("training_jct_mean_s", "trn JCT h", 3600.0, "{:.2f}"),
    ("training_jct_p99_s", "trn p99 h", 3600.0, "{:.1f}"),
    ("sim_wall_s", "replay s", 1.0, "{:.1f}"),
)


def deployments_for(capacity_gpus: int, share: float, window: tuple[float, float]) -> tuple[Deployment, ...]:
    """The generated deployments (module docstring), scaled so their joint peak is about `share` of
    the fleet (whole replicas, so within a replica of the largest size)."""

    def build(scale: float) -> tuple[Deployment, ...]:
        result = []
        for name, gpus, peak_hour, part in SHAPES:
            peak = max(1, round(scale * part * share * capacity_gpus / gpus))
            demand = DiurnalDemand(round(TROUGH * peak), peak, peak_hour)
            result.append(Deployment(name, "serving", demand, gpus_per_replica=gpus, slo_s=SLO_S))
        return tuple(result)

    first = build(1.0)
    joint_peak = demand_profile(first, *window).peak_gpus
    return build(share * capacity_gpus / joint_peak) if joint_peak else first


def shaped(jobs: tuple[Job, ...], checkpoint: str) -> list[Job]:
    if checkpoint == "none":
        return list(jobs)
    return [replace(job, checkpoint_interval_s=CHECKPOINT_INTERVAL_S, checkpoint_on_preempt=True) for job in jobs]


def run_layout(jobs: list[Job], nodes: Any, deployments: Any, layout: str, window: tuple[float, float]) -> dict:
    cpu = time.process_time()
    try:
        result = simulate_serving(jobs, nodes, deployments, layout=layout, window=window, policy_name=layout)
    except SimulationStalled as stalled:
        sys.stderr.write(f"\n{layout}: {stalled}\n")
        return {"policy": layout, "error": str(stalled)}
    metrics = dict(result.metrics)
    training_ids = {job.id for job in jobs}
    jct = sorted(v for k, v in result.jct_by_job.items() if k in training_ids)
    area_h = metrics["capacity_gpus"] * metrics["window_s"] / 3600.0
    training_gpu_h = (metrics["training_utilisation"] or 0.0) * area_h
    metrics.update(
        {
            "training_jct_mean_s": mean(jct),
            "training_jct_p99_s": percentile(jct, 99),
            "training_gpu_hours": training_gpu_h,
            "training_lost_share_by_serving": (
                metrics["training_lost_gpu_hours_by_serving"] / training_gpu_h if training_gpu_h else None
            ),
            "replay_cpu_s": time.process_time() - cpu,
        }
    )
    return metrics


def checks(results: list[dict[str, Any]], checkpoint: str, bound: float) -> dict[str, Any] | None:
    """The aims on the shared fleet. `bound`: the most utilisation sharing can take back from the
    peak-sized split, its serving partition's idle time, (peak - mean) / capacity."""
    by_layout = {r["policy"]: r for r in results if "error" not in r}
    shared, peak = by_layout.get("shared"), by_layout.get("static-peak")
    if shared is None:
        return None
    gain = shared["utilisation"] - peak["utilisation"] if peak else None
    lost = shared["training_lost_share_by_serving"]
    return {
        "attainment": shared["serving_slo_attainment"],
        "attainment_at_least_99_9_percent": (shared["serving_slo_attainment"] or 0.0) >= ATTAINMENT_MIN,
        "utilisation_gain_over_static_peak": gain,
        "utilisation_gain_at_least_15_points": gain is not None and gain >= UTILISATION_GAIN_MIN,
        "utilisation_gain_bound": bound,
        "training_lost_share_by_serving": lost,
        "training_lost_under_2_percent": None if checkpoint == "none" else (lost or 0.0) < LOST_SHARE_MAX,
    }


def table(case: dict[str, Any]) -> str:
    head = f"{'layout':<12}" + "".join(f"{label:>12}" for _, label, _, _ in TABLE)
    lines = [f"{case['case']}: {case['fleet']} = {case['capacity_gpus']} GPUs, {case['jobs']} jobs", head]
    for result in case["results"]:
        if "error" in result:
            lines.append(f"{result['policy']:<12} stalled: {result['error'][:80]}")
            continue
        cells = []
        for key, _, scale, fmt in TABLE:
            value = result.get(key)
            cells.append(f"{'-':>12}" if value is None else f"{fmt.format(value / scale):>12}")
        lines.append(f"{result['policy']:<12}" + "".join(cells))
    return "\n".join(lines)


def select(trace: list[TraceJob], options: argparse.Namespace) -> list[TraceJob]:
    if options.window:
        start_day, days = (float(part) for part in options.window.split(":"))
        lo = trace[0].submit_s + start_day * 86400.0
        trace = [job for job in trace if lo <= job.submit_s < lo + days * 86400.0]
    if options.limit:
        trace = trace[: options.limit]
    if len(trace) < 2:
        raise SystemExit("the selection holds fewer than two jobs")
    return trace


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=Path, default=DEFAULT_TRACES)
    parser.add_argument("--share", type=float, action="append", help="serving's joint peak / fleet (repeatable)")
    parser.add_argument("--checkpoint", action="append", choices=CHECKPOINTS, help="repeatable")
    parser.add_argument("--layout", action="append", choices=LAYOUTS, help="repeatable")
    parser.add_argument("--load", type=float, default=0.8, help="offered training load the fleet is sized for")
    parser.add_argument("--window", help="START_DAY:DAYS of the merged trace")
    parser.add_argument("--limit", type=int, help="only the first N jobs of the selection")
    parser.add_argument("--quick", action="store_true", help=f"first {QUICK_LIMIT} jobs, share 0.2, one case")
    options = parser.parse_args(argv)
    if options.quick:
        options.limit = options.limit or QUICK_LIMIT
        options.share = options.share or [SHARES[0]]
        options.checkpoint = options.checkpoint or ["on-preempt"]
    for share in options.share or ():
        if not 0.0 < share < 1.0:
            parser.error(f"--share {share}: must be between 0 and 1")
    return options


def main(argv: list[str] | None = None) -> int:
    options = parse(argv)
    started = time.time()
    files = sorted(options.traces.glob("cluster*.csv"))
    if not files:
        raise SystemExit(f"no ITP trace files (cluster*.csv) in {options.traces}: pass --traces DIR")
    trace = select(load_itp(files), options)
    fleet = fleet_for_load(trace, options.load)
    workload = build_workload(trace, fleet)
    nodes = fleet.nodes()
    window = (min(j.submit_s for j in workload.jobs), max(j.submit_s for j in workload.jobs))
    cases = []
    for share, checkpoint in itertools.product(options.share or SHARES, options.checkpoint or CHECKPOINTS):
        deployments = deployments_for(fleet.capacity_gpus, share, window)
        profile = demand_profile(deployments, *window)
        jobs = shaped(workload.jobs, checkpoint)
        results = [run_layout(jobs, nodes, deployments, layout, window) for layout in options.layout or list(LAYOUTS)]
        case = {
            "case": f"serving {share:.0%} of the fleet at peak, checkpoints {checkpoint}",
            "share": share,
            "checkpoint": checkpoint,
            "fleet": fleet.describe(),
            "capacity_gpus": fleet.capacity_gpus,
            "jobs": len(jobs),
            "serving_peak_gpus": profile.peak_gpus,
            "serving_mean_gpus": profile.mean_gpus,
            "deployments": [
                {
                    "name": d.name,
                    "gpus_per_replica": d.gpus_per_replica,
                    "min_replicas": d.demand.min_replicas,
                    "max_replicas": d.demand.max_replicas,
                    "peak_hour": d.demand.peak_hour,
                    "serving_slo_s": d.slo_s,
                }
                for d in deployments
                if isinstance(d.demand, DiurnalDemand)
            ],
            "results": results,
            "checks": checks(results, checkpoint, (profile.peak_gpus - profile.mean_gpus) / fleet.capacity_gpus),
        }
        sys.stderr.write(table(case) + "\n\n")
        cases.append(case)
    output = {
        "meta": {
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(started)),
            "wall_s": time.time() - started,
            "trace_jobs": len(trace),
            "load": options.load,
            "window": options.window,
            "limit": options.limit,
            "policy": "fleetline",
            "contract_keys": list(CONTRACT_KEYS),
        },
        "cases": cases,
    }
    print(json.dumps(output, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
