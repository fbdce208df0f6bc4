"""`python -m scheduling.sim`: replay traces under one or more policies and write the metrics JSON.

    python -m scheduling.sim --trace a.csv [--trace b.csv ...] --format canonical|itp|helios \
        --fleet 2x8x10x8 [--quotas quotas.json] --policy fifo [--policy easy ...] \
        --json out.json [--html report.html] [--seed N] [--limit N] [--estimate exact|2.0] \
        [--serving deployments.json] [--engine fast|reference]

Policies: fifo, easy, fleetline and sjf-oracle (shortest true duration first, no quotas, no
preemption: the unfair bound). Exit codes: 2 for a bad trace, fleet or quota file, 3 when a replay
stalls (the error names the jobs it kept acting on).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from .failures import FailureOptions
from .fleet import SpecError, load_quotas, parse_fleet
from .progress import ProgressBar
from .runner import POLICIES, compare_policies
from .serving import load_deployments
from .simulator import ENGINES, SimulationStalled
from .trace import FORMATS, TraceError, load_trace
from .workload import parse_estimate


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m scheduling.sim", description=__doc__.splitlines()[0])
    add_arguments(parser)
    return parser


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--trace", action="append", required=True, help="trace file (repeatable)")
    parser.add_argument("--format", choices=FORMATS, default="canonical", help="trace format")
    parser.add_argument("--fleet", required=True, help="PODSxRACKSxNODESxGPUS[:accelerator] or a JSON file")
    parser.add_argument("--quotas", help="quota file (JSON or CSV); without it teams share without guarantees")
    parser.add_argument("--policy", action="append", choices=sorted(POLICIES), help="policy (repeatable)")
    parser.add_argument("--json", dest="json_path", help="write the metrics JSON here ('-' for stdout)")
    parser.add_argument("--html", dest="html_path", help="write a self-contained HTML report here")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--limit", type=int, help="replay only the first N jobs (by submit time)")
    parser.add_argument("--estimate", default="exact", help="time limits when the trace has none: exact or a factor")
    parser.add_argument("--cycle-interval", type=float, default=60.0, help="periodic re-plan interval (sim s)")
    parser.add_argument(
        "--tick",
        type=float,
        default=0.0,
        help="plan on ticks of this many sim s, as the live cycle does (0: at every event)",
    )
    parser.add_argument("--failures", help="inject seeded failures: SEED or SEED:RATE_SCALE (e.g. 7:100)")
    parser.add_argument("--serving", help="serving deployments (JSON or CSV) sharing the fleet over the trace's window")
    parser.add_argument("--max-errors", type=int, default=1, help="trace errors to collect before stopping")
    parser.add_argument(
        "--engine",
        choices=sorted(ENGINES),
        default="fast",
        help="the engine that plans: fast, or reference (the rules stated plainly: the same results, slowly)",
    )


def run(options: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    try:
        estimate = parse_estimate(options.estimate)
        failures = FailureOptions.parse(options.failures) if options.failures else None
        fleet = parse_fleet(options.fleet)
        quotas = load_quotas(options.quotas, default_accelerator=fleet.accelerators[0]) if options.quotas else None
        trace = load_trace(options.trace, options.format, max_errors=options.max_errors)
        serving = (
            load_deployments(options.serving, default_accelerator=fleet.accelerators[0]) if options.serving else ()
        )
        comparison = compare_policies(
            trace,
            fleet,
            options.policy or ["fleetline"],
            quotas=quotas,
            estimate=estimate,
            seed=options.seed,
            limit=options.limit,
            cycle_interval_s=options.cycle_interval,
            tick_s=options.tick,
            progress=lambda name: ProgressBar(name, stream=stderr),
            failures=failures,
            serving=serving,
            engine=options.engine,
        )
    except TraceError as error:
        for each in error.errors:
            stderr.write(f"trace error: {each}\n")
        return 2
    except (SpecError, ValueError) as error:
        stderr.write(f"error: {error}\n")
        return 2
    except SimulationStalled as error:
        stderr.write(f"\nerror: {error}\n")
        return 3
    text = comparison.to_json()
    if options.json_path in (None, "-"):
        stdout.write(text + "\n")
    else:
        Path(options.json_path).write_text(text + "\n", encoding="utf-8")
    if options.html_path:
        from .report import write_html

        write_html(comparison, options.html_path)
    if quotas is None:
        stderr.write("note: no quotas given: teams share the fleet without guarantees\n")
    stderr.write(summary_table(comparison.as_dict()["results"]) + "\n")
    return 0


SUMMARY_COLUMNS: tuple[tuple[str, str, float], ...] = (
    ("utilisation", "util", 1.0),
    ("goodput", "goodput", 1.0),
    ("limit_ratio", "limit", 1.0),
    ("jct_mean_s", "jct_mean_h", 3600.0),
    ("jct_p99_s", "jct_p99_h", 3600.0),
    ("wait_mean_s", "wait_mean_h", 3600.0),
    ("bounded_slowdown_mean", "bsld", 1.0),
    ("jain_fairness", "jain", 1.0),
    ("topology_optimal_fraction", "topo_opt", 1.0),
    ("preemptions", "preempt", 1.0),
    ("sim_wall_s", "wall_s", 1.0),
    ("events_per_s", "events/s", 1.0),
)


def summary_table(results: Sequence[dict]) -> str:
    header = f"{'policy':<10}" + "".join(f"{label:>12}" for _, label, _ in SUMMARY_COLUMNS)
    lines = [header]
    for metrics in results:
        cells = []
        for key, _, scale in SUMMARY_COLUMNS:
            value = metrics.get(key)
            cells.append(f"{'-':>12}" if value is None else f"{value / scale:>12.3f}")
        lines.append(f"{metrics.get('policy', '?'):<10}" + "".join(cells))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    return run(build_parser().parse_args(argv), sys.stdout, sys.stderr)
