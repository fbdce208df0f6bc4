"""Replay all ten ITP clusters as ten teams on one shared fleet under fifo, easy and fleetline.

    python3 benchmarks/sim_itp.py [--traces DIR] [--limit N] [--load 0.9] [--policy NAME ...] [--profile]

Policies: fifo, easy, fleetline (the default three) and sjf-oracle (shortest true duration first).

The fleet is sized from the trace so the offered load is about `--load`: total GPU-seconds /
window / load, rounded up to whole 8-GPU nodes, shaped into racks of 10 nodes and pods of 8 racks
(the last pod and rack may be smaller). Prints a comparison table to stderr and JSON to stdout.
`--profile` runs the first policy under cProfile and prints the top functions to stderr.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scheduling.sim.cli import summary_table  # noqa: E402
from scheduling.sim.progress import ProgressBar  # noqa: E402
from scheduling.sim.runner import POLICIES, compare_policies  # noqa: E402
from scheduling.sim.sizing import fleet_for_load  # noqa: E402
from scheduling.sim.trace import load_itp  # noqa: E402

DEFAULT_TRACES = Path(__file__).resolve().parent.parent.parent / "shared" / "traces" / "itp"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=Path, default=DEFAULT_TRACES)
    parser.add_argument("--limit", type=int, help="only the first N jobs (by submit time) of the merged trace")
    parser.add_argument("--load", type=float, default=0.9)
    parser.add_argument("--policy", action="append", choices=sorted(POLICIES))
    parser.add_argument("--estimate", type=float, help="time limit = factor x duration (default: exact)")
    parser.add_argument("--profile", action="store_true")
    options = parser.parse_args()
    trace = load_itp(sorted(options.traces.glob("cluster*.csv")))
    if options.limit:
        trace = trace[: options.limit]
    fleet = fleet_for_load(trace, options.load)
    policies = options.policy or ["fifo", "easy", "fleetline"]
    if options.profile:
        profiler = cProfile.Profile()
        profiler.enable()
        compare_policies(trace, fleet, policies[:1], estimate=options.estimate)
        profiler.disable()
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(25)
        sys.stderr.write(out.getvalue())
        return 0
    comparison = compare_policies(
        trace,
        fleet,
        policies,
        estimate=options.estimate,
        progress=lambda name: ProgressBar(name),
    )
    data = comparison.as_dict()
    sys.stderr.write(f"fleet {fleet.describe()} = {fleet.capacity_gpus} GPUs, {len(trace)} jobs\n")
    sys.stderr.write(summary_table(data["results"]) + "\n")
    print(json.dumps(data, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
