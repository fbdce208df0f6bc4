"""End-to-end live cycle at scale: snapshot + engine + apply + publish on a real database.

Builds a 2,048-node fleet (8 GPUs each), about 2,000 running jobs and 10,000 pending ones in the
database named by DATABASE_URL (default: a PostgreSQL database ``fleetline_bench`` on
127.0.0.1, created and wiped by this script), then times steady-state ticks. Prints JSON. The
first tick, which starts the running set on the idle fleet, is reported apart (``fill_tick``). A
tick that fails (PostgreSQL ending its transaction) is retried with the next token, as the next
leader would, and listed (``failed_ticks``). At 2,048 and 16,384 nodes each figure is printed with
issue 46's goal for it and whether it holds (``goals``), with the machine's calibration
(``machine``: engine_cycle.py's fixed workload, CPUs, load average).

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/fleetline_bench python benchmarks/live_cycle.py
    # the placement burst of web_load.py (10,000 jobs of 1-2 GPUs) as the first tick, in one process:
    python benchmarks/live_cycle.py --running 10000 --running-sizes 1,1,1,2 --pending 0 --ticks 1
    # 16,384 nodes, 16,000 jobs starting in the first tick, then 80,000 pending:
    python benchmarks/live_cycle.py --nodes 16384 --running 16000 --pending 80000
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

from harness import database_fresh, goal_check, machine_calibration, nodes_build  # noqa: E402 - beside this script

# Issue 46's goals: at 2,048 nodes (about 2,000 running, 10,000 pending) and at 16,384 nodes
# (16,000 starting, 80,000 pending), with the default settings.
GOALS = {
    2048: {"median_ms": 250.0, "p95_ms": 400.0},
    16384: {"fill_ms": 5000.0, "median_ms": 1500.0},
}
# A tick that fails (PostgreSQL ending its transaction) is retried with the next token, as the
# next leader would, at most this many times in a row before the run gives up.
RETRIES = 3


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

    call_command("migrate", verbosity=0)
    _build(args.nodes, args.running, tuple(int(g) for g in args.running_sizes.split(",")), args.seed)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    calibration = machine_calibration()
    ticker = _Ticker(start)
    # The first tick starts the clock and the running set: a burst of starts on an idle fleet.
    fill = ticker.tick()
    ticker.tick()
    _add_pending(args.pending, args.seed)
    steady = [ticker.tick() for _ in range(args.ticks)]
    print(json.dumps(_report(args, calibration, ticker, fill, steady), indent=2))


def _rebuilds() -> dict[str, int] | None:
    """How often the ticks rebuilt the fleet state from scratch, by reason (None: code from
    before the kept state, run side by side)."""
    try:
        from scheduling.cycle.kept import kept_fleet_rebuilds
    except ImportError:
        return None
    return kept_fleet_rebuilds()


class _Ticker:
    """Ticks with rising tokens, each timed (wall and CPU) and its statements counted; a tick that
    fails is retried with the next token, and its error kept."""

    def __init__(self, start: datetime) -> None:
        self.start = start
        self.token = 0
        self.failures: list[str] = []

    def tick(self) -> dict[str, Any] | None:
        from django.db import connection

        from scheduling.cycle.tick import cycle_tick

        for _ in range(RETRIES + 1):
            self.token += 1
            wall, cpu = time.perf_counter(), time.process_time()
            try:
                with connection.execute_wrapper(counter := _QueryCounter()):
                    result = cycle_tick(token=self.token, wall_now=self.start + timedelta(seconds=self.token))
            except Exception as error:  # noqa: BLE001 - a failed tick is a figure of the run
                self.failures.append(f"token {self.token}: {type(error).__name__}: {str(error).splitlines()[0]}")
                connection.close()
                continue
            if result is None:
                self.failures.append(f"token {self.token}: refused")
                continue
            return {
                "result": result,
                "ms": sum(result.timings_ms.values()),
                "wall_ms": (time.perf_counter() - wall) * 1000.0,
                "cpu_ms": (time.process_time() - cpu) * 1000.0,
                "queries": counter.count,
            }
        return None


def _report(
    args: argparse.Namespace,
    calibration: dict[str, Any],
    ticker: _Ticker,
    fill: dict[str, Any] | None,
    steady: list[dict[str, Any] | None],
) -> dict[str, Any]:
    from django.conf import settings
    from django.db import connection

    from scheduling.models import Job

    done = [tick for tick in steady if tick is not None]
    totals = sorted(tick["ms"] for tick in done)
    median = round(statistics.median(totals), 1) if totals else None
    p95 = round(totals[min(len(totals) - 1, int(0.95 * len(totals)))], 1) if totals else None
    fill_ms = round(fill["ms"], 1) if fill else None
    every_tick = fill is not None and len(done) == len(steady)
    goals: dict[str, Any] = {"every_tick_completes": {"figure": every_tick, "goal": True, "holds": every_tick}}
    wanted = GOALS.get(args.nodes, {})
    for name, figure in (("fill_ms", fill_ms), ("median_ms", median), ("p95_ms", p95)):
        if name in wanted:
            goals[name] = goal_check(figure, at_most=wanted[name])
    return {
        "database": connection.vendor,
        "nodes": args.nodes,
        "gpus": args.nodes * 8,
        "running": Job.objects.filter(state=Job.State.RUNNING).count(),
        "pending": Job.objects.filter(state=Job.State.PENDING).count(),
        "settings": {
            "FLEET_CYCLE_IDLE_TIMEOUT_S": settings.FLEET_CYCLE_IDLE_TIMEOUT_S,
            "FLEET_CYCLE_REBUILD_EVERY": getattr(settings, "FLEET_CYCLE_REBUILD_EVERY", None),
        },
        "fill_tick": None
        if fill is None
        else {
            "started": fill["result"].applied.count("started"),
            "ms": fill_ms,
            "cpu_ms": round(fill["cpu_ms"], 1),
            "step_ms": {k: round(v, 1) for k, v in fill["result"].timings_ms.items()},
            "queries": fill["queries"],
        },
        "ticks": args.ticks,
        "ticks_completed": len(done),
        "failed_ticks": ticker.failures,
        "median_ms": median,
        "p95_ms": p95,
        "median_cpu_ms": round(statistics.median(tick["cpu_ms"] for tick in done), 1) if done else None,
        "median_step_ms": {
            k: round(statistics.median(tick["result"].timings_ms.get(k, 0.0) for tick in done), 1)
            for k in (done[0]["result"].timings_ms if done else {})
        },
        "queries_median": statistics.median(tick["queries"] for tick in done) if done else None,
        # Each steady tick in order, with its steps: a slow one among them is told apart.
        "steady_ticks": [
            {"ms": round(tick["ms"], 1), "step_ms": {k: round(v, 1) for k, v in tick["result"].timings_ms.items()}}
            for tick in done
        ],
        "state_rebuilds": _rebuilds(),
        "goals": goals,
        "machine": {**calibration, "load_average_at_end": [round(x, 2) for x in os.getloadavg()]},
    }


if __name__ == "__main__":
    main()
