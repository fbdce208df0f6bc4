"""End-to-end live cycle at scale: snapshot + engine + apply + publish on a real database.

Builds a 2,048-node fleet (8 GPUs each), about 2,000 running jobs and 10,000 pending ones in the
database named by DATABASE_URL (default: a PostgreSQL database ``fleetline_bench`` on
127.0.0.1, created and wiped by this script), then times steady-state ticks. Prints JSON. The
first tick, which starts the running set on the idle fleet, is reported apart (``fill_tick``).

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/fleetline_bench python benchmarks/live_cycle.py
    # the placement burst of web_load.py (10,000 jobs of 1-2 GPUs) as the first tick, in one process:
    python benchmarks/live_cycle.py --running 10000 --running-sizes 1,1,1,2 --pending 0 --ticks 1
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/fleetline_bench")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
os.environ.setdefault("FLEET_DEMO_WORKLOAD", "0")
os.environ.setdefault("SECRET_KEY", "fleetline-benchmark-only-not-secret")  # DEBUG is off by default

from harness import database_fresh, nodes_build  # noqa: E402 - beside this script


def _build(nodes: int, running: int, running_sizes: tuple[int, ...], seed: int) -> None:

    from scheduling.models import AcceleratorType, FleetClock, Job
    from tenants.models import Department, FleetPolicy, PriorityClass, Quota, Team

    rng = random.Random(seed)
    h100 = AcceleratorType.objects.create(name="H100")
    node_rows = nodes_build(nodes=nodes, accelerator=h100)
    department = Department.objects.create(name="Research")
    teams = [Team.objects.create(department=department, name=f"team-{i}", slug=f"team-{i}") for i in range(16)]
    for team in teams:
        Quota.objects.create(team=team, accelerator_type=h100, guaranteed=len(node_rows) * 8 // 20, borrow_limit=None)
    FleetPolicy.objects.create(pk=FleetPolicy.SINGLETON_ID)
    training = PriorityClass.objects.create(name="training", value=300, kind="training", preemptible=True)
    FleetClock.objects.create(pk=1, sim_now_s=0.0)

    def jobs(count: int, sizes: tuple[int, ...], prefix: str) -> list[Job]:
        return [
            Job(
                team=rng.choice(teams),
                name=f"{prefix}-{i}",
                kind="training",
                priority_class=training,
                accelerator_type=h100,
                gpus=rng.choice(sizes),
                duration_s=rng.uniform(3600, 86400),
                time_limit_s=86400 * 2,
                checkpoint_interval_s=1800,
                submit_s=0.0,
            )
            for i in range(count)
        ]

    Job.objects.bulk_create(jobs(running, running_sizes, "run"), batch_size=2000)


def _add_pending(count: int, seed: int) -> None:
    from scheduling.models import Job

    rng = random.Random(seed + 1)
    template = Job.objects.order_by("id").first()
    assert template is not None
    teams = list(Job.objects.values_list("team_id", flat=True).distinct())
    Job.objects.bulk_create(
        [
            Job(
                team_id=rng.choice(teams),
                name=f"queued-{i}",
                kind="training",
                priority_class_id=template.priority_class_id,
                accelerator_type_id=template.accelerator_type_id,
                gpus=rng.choice((1, 2, 4, 8, 16, 32, 64)),
                duration_s=rng.uniform(3600, 86400),
                time_limit_s=86400 * 2,
                checkpoint_interval_s=1800,
                submit_s=60.0,
            )
            for i in range(count)
        ],
        batch_size=2000,
    )


class _QueryCounter:
    """Counts the statements a tick sends (Django's query log keeps only the last 9,000)."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        self.count += 1
        return execute(sql, params, many, context)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=2048)
    parser.add_argument("--running", type=int, default=2000)
    parser.add_argument(
        "--running-sizes",
        default="1,2,4,8,8,16",
        help="GPUs of the jobs the first tick starts, drawn at random (1,1,1,2 with --running 10000: "
        "web_load's placement burst in one process)",
    )
    parser.add_argument("--pending", type=int, default=10000)
    parser.add_argument("--ticks", type=int, default=10)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    database_fresh(os.environ["DATABASE_URL"])

    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    from scheduling.cycle.tick import cycle_tick
    from scheduling.models import Job

    call_command("migrate", verbosity=0)
    _build(args.nodes, args.running, tuple(int(g) for g in args.running_sizes.split(",")), args.seed)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    # The first tick starts the clock and the running set: a burst of starts on an idle fleet.
    fill_cpu_start = time.process_time()
    with connection.execute_wrapper(fill_queries := _QueryCounter()):
        fill = cycle_tick(token=1, wall_now=start)
    fill_cpu_ms = (time.process_time() - fill_cpu_start) * 1000.0
    assert fill is not None
    cycle_tick(token=2, wall_now=start + timedelta(seconds=1))
    _add_pending(args.pending, args.seed)
    totals, cpu, laps, queries = [], [], [], []
    for i in range(args.ticks):
        cpu_start = time.process_time()
        with connection.execute_wrapper(captured := _QueryCounter()):
            result = cycle_tick(token=3 + i, wall_now=start + timedelta(seconds=2 + i))
        cpu.append((time.process_time() - cpu_start) * 1000.0)
        assert result is not None
        totals.append(sum(result.timings_ms.values()))
        laps.append(result.timings_ms)
        queries.append(captured.count)
    ordered = sorted(totals)
    print(
        json.dumps(
            {
                "database": connection.vendor,
                "nodes": args.nodes,
                "gpus": args.nodes * 8,
                "running": Job.objects.filter(state=Job.State.RUNNING).count(),
                "pending": Job.objects.filter(state=Job.State.PENDING).count(),
                "fill_tick": {
                    "started": fill.applied.count("started"),
                    "ms": round(sum(fill.timings_ms.values()), 1),
                    "cpu_ms": round(fill_cpu_ms, 1),
                    "step_ms": {k: round(v, 1) for k, v in fill.timings_ms.items()},
                    "queries": fill_queries.count,
                },
                "ticks": args.ticks,
                "median_ms": round(statistics.median(totals), 1),
                "p95_ms": round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], 1),
                "median_cpu_ms": round(statistics.median(cpu), 1),
                "median_step_ms": {k: round(statistics.median(lap[k] for lap in laps), 1) for k in laps[0]},
                "queries_median": statistics.median(queries),
                "target_ms": 1000,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
