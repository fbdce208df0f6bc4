"""How far start estimates can be trusted: the ranges shown with them, replayed on ITP and Philly.

    python3 benchmarks/estimates.py [--trace itp --trace philly] [--load 1.07] [--limit N]
        [--window START_DAY:DAYS] [--defaults] > out.json

Each trace is replayed under fleetline on a fleet sized for `--load` (as in `sim_quotas.py`: teams
guaranteed 90 % of the fleet in proportion to their demand, borrowing up to all of it, on the live
cycle's 60 s ticks). The simulator records the first estimate of an even sample of about 2,000 jobs
and gives each the range the live pages would have shown (`sim.estimate_coverage`: calibrated on
the starts known by then). Prints JSON: per trace `estimate_within_range` (of the sampled jobs that
started, the share whose start fell within the range first shown), per size (one node, gang), how
wide the ranges were, and the estimate errors (actual / estimated wait) of the same jobs.
`--defaults` also prints the calibration of all the outcomes of the traces together: the ratios of
`engine.estimate_range.DEFAULT_RATIOS`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scheduling.engine.estimate_range import (  # noqa: E402
    DEFAULT_CALIBRATION,
    SIZES,
    EstimateOutcome,
    calibrate,
)
from scheduling.sim.estimate_coverage import ShownEstimate, range_coverage  # noqa: E402
from scheduling.sim.runner import compare_policies  # noqa: E402
from scheduling.sim.sizing import fleet_for_load, quotas_by_demand  # noqa: E402
from scheduling.sim.trace import TraceJob, load_canonical, load_itp  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
TRACES = {
    "itp": lambda: load_itp(sorted((ROOT.parent / "shared" / "traces" / "itp").glob("cluster*.csv"))),
    "philly": lambda: load_canonical([ROOT.parent / "shared" / "traces" / "philly-late2017" / "jobs.csv"]),
}
GUARANTEED_SHARE = 0.9
TICK_S = 60.0
KEYS = (
    "estimate_within_range",
    "estimate_range_jobs",
    "estimate_range_width_p50",
    "estimate_range_high_p50",
    "estimate_error_p10",
    "estimate_error_p50",
    "estimate_error_p90",
    "estimate_jobs",
    "estimate_absent",
    "estimate_sampled_every",
    "utilisation",
    "wait_mean_s",
    "sim_wall_s",
)


def select(trace: list[TraceJob], window: str | None, limit: int | None) -> list[TraceJob]:
    if window:
        start_day, days = (float(part) for part in window.split(":"))
        lo = trace[0].submit_s + start_day * 86400.0
        trace = [job for job in trace if lo <= job.submit_s < lo + days * 86400.0]
    return trace[:limit] if limit else trace


def replay(name: str, trace: list[TraceJob], load: float) -> tuple[dict[str, Any], tuple[ShownEstimate, ...]]:
    fleet = fleet_for_load(trace, load)
    quotas = quotas_by_demand(trace, fleet, guaranteed_share=GUARANTEED_SHARE)
    result = compare_policies(trace, fleet, ["fleetline"], quotas=quotas, tick_s=TICK_S).results[0]
    metrics = result.metrics
    coverage = range_coverage(result.estimates)  # as the metrics have it, per size
    by_size = {
        size: {"started": started, "within_range": within / started if started else None}
        for size, (within, started) in coverage.by_size.items()
    }
    return {
        "trace": name,
        "jobs": len(trace),
        "fleet": fleet.describe(),
        "capacity_gpus": fleet.capacity_gpus,
        "load": load,
        **{key: metrics.get(key) for key in KEYS},
        "by_size": by_size,
    }, result.estimates


def defaults(estimates: list[ShownEstimate]) -> dict[str, Any]:
    outcomes = [
        EstimateOutcome(item.gpus, item.estimated_start_s - item.shown_s, item.started_s - item.shown_s)
        for item in estimates
        if item.started_s is not None
    ]
    calibration = calibrate(outcomes, fallback=DEFAULT_CALIBRATION, source="replays")
    return {
        size: [
            {"up_to_s": band.up_to_s, "low": round(band.low, 3), "high": round(band.high, 3), "samples": band.samples}
            for band in calibration.bands
            if band.size == size
        ]
        for size in SIZES
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", action="append", choices=sorted(TRACES), help="repeatable (default: both)")
    parser.add_argument("--load", type=float, default=1.07, help="offered load the fleet is sized for")
    parser.add_argument("--limit", type=int, help="only the first N jobs of each trace (of the window)")
    parser.add_argument("--window", help="START_DAY:DAYS of each trace")
    parser.add_argument("--defaults", action="store_true", help="print the calibration of all the outcomes")
    options = parser.parse_args(argv)
    started = time.time()
    results: list[dict[str, Any]] = []
    everything: list[ShownEstimate] = []
    for name in options.trace or sorted(TRACES):
        trace = select(TRACES[name](), options.window, options.limit)
        if len(trace) < 2:
            raise SystemExit(f"{name}: the selection holds fewer than two jobs")
        result, estimates = replay(name, trace, options.load)
        sys.stderr.write(
            f"{name}: {result['estimate_range_jobs']} starts, within range {result['estimate_within_range']}\n"
        )
        results.append(result)
        everything += estimates
    output: dict[str, Any] = {"wall_s": time.time() - started, "window": options.window, "limit": options.limit}
    output["results"] = results
    if options.defaults:
        output["defaults"] = defaults(everything)
    print(json.dumps(output, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
