"""Lost GPU-hours and MTTR against heartbeat timeout and storage bandwidth, on a replayed trace.

    python3 benchmarks/failures.py [--traces DIR] [--limit 3000] [--rate-scale 100] [--seed 7] [--load 0.6]

Replays the first ``--limit`` jobs of the ITP traces in ../shared/traces/itp (the bundled sample
when those are absent) on a fleet sized for ``--load`` offered load, every job checkpointing every
30 min with 12 GB of checkpoint per GPU (a 7B-parameter model with Adam state is ~100 GB on 8
GPUs). Failures follow the Llama 3 rates scaled by ``--rate-scale`` so a short trace sees hundreds.
Sweeps:
- heartbeat timeout (k missed 10 s heartbeats) at 50 GB/s of storage, with the detector's measured
  time to detect and false positives per node-day on noisy crafted streams;
- storage bandwidth at k = 3, with the restore time of each restart (start -> gang computing again;
  the requeue wait before it is reported apart) against its physical lower bound (checkpoint bytes /
  aggregate bandwidth + overhead).
Prints JSON to stdout and a table to stderr.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from sim_itp import fleet_for_load  # noqa: E402

from scheduling.engine import Job, Policy  # noqa: E402
from scheduling.engine.detector import DetectorPolicy, Streams, measure_detector  # noqa: E402
from scheduling.engine.progress import restore_lower_bound_s  # noqa: E402
from scheduling.sim.failures import FailureOptions  # noqa: E402
from scheduling.sim.simulator import run_simulation  # noqa: E402
from scheduling.sim.trace import load_itp  # noqa: E402
from scheduling.sim.workload import build_workload  # noqa: E402

SAMPLE = Path(__file__).resolve().parent.parent / "scheduling" / "sim" / "data" / "itp-sample"
FULL = Path(__file__).resolve().parent.parent.parent / "shared" / "traces" / "itp"
CHECKPOINT_INTERVAL_S, CHECKPOINT_GB_PER_GPU = 1800.0, 12.0
TIMEOUT_KS = (1, 3, 10, 30)
STORAGE_GBPS = (2.0, 10.0, 50.0, 200.0)


def run_once(jobs: list[Job], nodes: Any, options: FailureOptions) -> dict[str, Any]:
    w0, w1 = jobs[0].submit_s, max(job.submit_s for job in jobs)
    hook = options.hook(nodes, start_s=w0, until_s=w1)
    result = run_simulation(jobs, nodes, Policy(), hooks=[hook], state_options=options.state_options())
    ratios, restores, waits = [], [], []
    for incident in hook.incidents:
        for job_id, resumed_s in incident.resumed_s.items():
            restarted_s = incident.restarted_s[job_id]
            restores.append(resumed_s - restarted_s)
            waits.append(restarted_s - (incident.detected_s or incident.failure.time_s))
            bound = restore_lower_bound_s(
                checkpoint_gb=incident.restored_gb[job_id],
                storage_gbps=options.storage_gbps,
                overhead_s=options.restart_overhead_s,
            )
            ratios.append((resumed_s - restarted_s) / bound)
    metrics = result.metrics
    return {
        "failures": metrics["failures"],
        "mttd_mean_s": metrics["mttd_mean_s"],
        "mttr_mean_s": metrics["mttr_mean_s"],
        "failure_lost_gpu_hours": metrics["failure_lost_gpu_hours"],
        "goodput": metrics["goodput"],
        "jct_mean_h": (metrics["jct_mean_s"] or 0.0) / 3600.0,
        "restarts": len(ratios),
        "requeue_wait_mean_s": sum(waits) / len(waits) if waits else None,
        "restore_mean_s": sum(restores) / len(restores) if restores else None,
        "restore_max_s": max(restores) if restores else None,
        "recovery_over_lower_bound_mean": sum(ratios) / len(ratios) if ratios else None,
        "recovery_over_lower_bound_min": min(ratios) if ratios else None,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=Path, default=FULL if FULL.is_dir() else SAMPLE)
    parser.add_argument("--limit", type=int, default=3000)
    parser.add_argument("--rate-scale", type=float, default=100.0)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--load", type=float, default=0.6, help="offered load the fleet is sized for")
    options = parser.parse_args()
    trace = load_itp(sorted(options.traces.glob("cluster*.csv")))
    trace = trace[: options.limit] if options.limit else trace
    fleet = fleet_for_load(trace, options.load)
    jobs = [
        replace(job, checkpoint_interval_s=CHECKPOINT_INTERVAL_S, checkpoint_gb=CHECKPOINT_GB_PER_GPU * job.gpus)
        for job in build_workload(trace, fleet).jobs
    ]
    nodes = fleet.nodes()
    base = FailureOptions(seed=options.seed, rate_scale=options.rate_scale)
    timeout_rows = []
    for k in TIMEOUT_KS:
        detector = DetectorPolicy(dead_after_missed=k)
        row = {"dead_after_missed": k, "timeout_s": detector.dead_after_s}
        row.update(run_once(jobs, nodes, replace(base, detector=detector)))
        stats = measure_detector(random.Random(options.seed), detector, Streams(gangs=20, horizon_s=1800.0))
        row["detector"] = stats.as_dict()
        timeout_rows.append(row)
    storage_rows = []
    for gbps in STORAGE_GBPS:
        row = {"storage_gbps": gbps}
        row.update(run_once(jobs, nodes, replace(base, storage_gbps=gbps)))
        storage_rows.append(row)
    report = {
        "trace_jobs": len(trace),
        "jobs": len(jobs),
        "capacity_gpus": fleet.capacity_gpus,
        "rate_scale": options.rate_scale,
        "seed": options.seed,
        "checkpoint": {"interval_s": CHECKPOINT_INTERVAL_S, "gb_per_gpu": CHECKPOINT_GB_PER_GPU},
        "restart_overhead_s": base.restart_overhead_s,
        "by_heartbeat_timeout": timeout_rows,
        "by_storage_bandwidth": storage_rows,
    }
    sys.stdout.write(json.dumps(report, indent=2) + "\n")
    sys.stderr.write(_table(timeout_rows, storage_rows) + "\n")
    return 0


def _fmt(value: Any, width: int = 10) -> str:
    if value is None:
        return f"{'-':>{width}}"
    return f"{value:>{width}.2f}" if isinstance(value, float) else f"{value:>{width}}"


def _table(timeout_rows: list[dict[str, Any]], storage_rows: list[dict[str, Any]]) -> str:
    lines = [
        f"{'timeout_s':>10}{'failures':>10}{'mttd_s':>10}{'mttr_s':>10}{'lost_gpu_h':>11}"
        f"{'det_ttd_s':>10}{'fp/node-d':>10}"
    ]
    for row in timeout_rows:
        det = row["detector"]
        lines.append(
            _fmt(row["timeout_s"])
            + _fmt(row["failures"])
            + _fmt(row["mttd_mean_s"])
            + _fmt(row["mttr_mean_s"])
            + _fmt(row["failure_lost_gpu_hours"], 11)
            + _fmt(det["dead_ttd_mean_s"])
            + _fmt(det["false_positives_per_node_day"])
        )
    lines.append("")
    lines.append(
        f"{'storage':>10}{'failures':>10}{'mttr_s':>10}{'lost_gpu_h':>11}{'restarts':>10}{'wait_s':>10}"
        f"{'restore_s':>10}{'max_rst_s':>10}{'rst/bound':>10}"
    )
    for row in storage_rows:
        lines.append(
            _fmt(row["storage_gbps"])
            + _fmt(row["failures"])
            + _fmt(row["mttr_mean_s"])
            + _fmt(row["failure_lost_gpu_hours"], 11)
            + _fmt(row["restarts"])
            + _fmt(row["requeue_wait_mean_s"])
            + _fmt(row["restore_mean_s"])
            + _fmt(row["restore_max_s"])
            + _fmt(row["recovery_over_lower_bound_mean"])
        )
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
