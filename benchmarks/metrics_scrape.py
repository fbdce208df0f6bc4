"""What one /metrics scrape costs on a production-size fleet with a long history.

Builds, in the database named by DATABASE_URL (default: a PostgreSQL database
``fleetline_bench_metrics`` on 127.0.0.1, created and wiped by this script), a 2,048-node fleet
(8 GPUs each), ``--running`` jobs holding a node each, ``--pending`` waiting jobs with their
reasons in Redis, and a history: ``--events`` scheduler events, ``--incidents`` incidents and
``--samples`` usage-ledger rows (a day old, but for the last five minutes' worth). The first scrape
settles that history into the counters' checkpoints; the script times it, then the fleet figures
alone and whole scrapes through the view, and prints JSON.

    python benchmarks/metrics_scrape.py                      # defaults below
    python benchmarks/metrics_scrape.py --events 2000000 --samples 2000000
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
os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/fleetline_bench_metrics")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
os.environ.setdefault("SECRET_KEY", "fleetline-benchmark-only-not-secret")

from harness import database_fresh, nodes_build  # noqa: E402 - beside this script

BATCH = 5000
FLEET_NODES = 2048  # 8 pods of 16 racks of 16 nodes, 8 GPUs each


def _build(args: argparse.Namespace) -> dict[str, float]:
    from scheduling.models import (
        AcceleratorType,
        Allocation,
        FleetClock,
        Incident,
        Job,
        Node,
        SchedulerEvent,
        UsageSample,
    )
    from tenants.models import Department, PriorityClass, Team

    rng = random.Random(args.seed)
    started = time.perf_counter()
    h100 = AcceleratorType.objects.create(name="H100")
    nodes_build(nodes=FLEET_NODES, accelerator=h100)
    nodes = list(Node.objects.order_by("id"))
    department = Department.objects.create(name="Research")
    teams = [Team.objects.create(department=department, name=f"Team {i}", slug=f"team-{i}") for i in range(8)]
    training = PriorityClass.objects.create(name="training", value=300, kind="training")
    common = {"priority_class": training, "accelerator_type": h100, "duration_s": 3600.0}
    running = [
        Job(team=rng.choice(teams), name=f"run-{i}", gpus=8, state="running", submit_s=0.0, started_s=0.0, anchor_s=0.0,
            borrowing=rng.random() < 0.2, kind=rng.choice(["training", "training", "batch", "serving"]), **common)
        for i in range(args.running)
    ]  # fmt: skip
    Job.objects.bulk_create(running, batch_size=BATCH)
    running_ids = list(Job.objects.filter(state="running").order_by("id").values_list("id", flat=True))
    Allocation.objects.bulk_create(
        [Allocation(job_id=job_id, node=nodes[i], gpus=8) for i, job_id in enumerate(running_ids)], batch_size=BATCH
    )
    Node.objects.filter(id__in=[n.id for n in nodes[: len(running_ids)]]).update(allocated_gpus=8)
    Job.objects.bulk_create(
        [Job(team=rng.choice(teams), name=f"wait-{i}", gpus=rng.choice([1, 8, 16]), submit_s=float(i), **common)
         for i in range(args.pending)],
        batch_size=BATCH,
    )  # fmt: skip
    kinds = ["started", "completed", "evicted", "submitted"]
    for start in range(0, args.events, BATCH):
        SchedulerEvent.objects.bulk_create(
            [SchedulerEvent(team=rng.choice(teams), kind=rng.choice(kinds), sim_time_s=float(i),
                            message="Evicted (preempted); 1.0 GPU-h rolled back to checkpoint")
             for i in range(start, min(args.events, start + BATCH))]
        )  # fmt: skip
    Incident.objects.bulk_create(
        [Incident(node=rng.choice(nodes), kind=rng.choice(["dead", "degraded", "slow"]), failed_at=i * 100.0,
                  detected_at=i * 100.0 + rng.uniform(5, 120), resumed_at=i * 100.0 + rng.uniform(200, 5000),
                  lost_gpu_s=rng.uniform(0, 30000))
         for i in range(args.incidents)],
        batch_size=BATCH,
    )  # fmt: skip
    now = datetime.now(UTC)
    for start in range(0, args.samples, BATCH):
        UsageSample.objects.bulk_create(
            [UsageSample(sim_time_s=float(i), interval_s=60.0, recorded_at=now, team=rng.choice(teams),
                         accelerator_type=h100, kind="training", allocated_gpu_s=480.0,
                         lost_gpu_s=rng.choice([0.0, 0.0, 0.0, 120.0]))
             for i in range(start, min(args.samples, start + BATCH))]
        )  # fmt: skip
    # The history is a day old, but for the last five minutes' worth of rows (a tick a second:
    # about 24 ledger rows and a few events each), which the counters have not settled yet.
    day_ago = now - timedelta(days=1)
    # (A history shorter than that is all recent: nothing to age.)
    recent_events = next(iter(SchedulerEvent.objects.order_by("-id").values_list("id", flat=True)[1500:1501]), None)
    if recent_events is not None:
        SchedulerEvent.objects.filter(id__lt=recent_events).update(created_at=day_ago)
    recent_samples = next(iter(UsageSample.objects.order_by("-id").values_list("id", flat=True)[7200:7201]), None)
    if recent_samples is not None:
        UsageSample.objects.filter(id__lt=recent_samples).update(recorded_at=day_ago)
    FleetClock.objects.update_or_create(pk=1, defaults={"sim_now_s": 1e6, "ticks": 100_000, "wall_updated_at": now})
    return {"build_s": round(time.perf_counter() - started, 1)}


def _pending_reasons() -> None:
    import redis
    from django.conf import settings

    from scheduling.live.cycle_timings import cycle_timings_record
    from scheduling.live.waits import WAITS_KEY, WAITS_VERSION_KEY
    from scheduling.models import Job

    client = redis.Redis.from_url(settings.REDIS_URL)
    reasons = ["quota", "capacity", "topology", "priority", "reserved-for:1"]
    document = {
        str(job_id): [reasons[job_id % len(reasons)], None, None]
        for job_id in Job.objects.filter(state="pending").values_list("id", flat=True)
    }
    client.set(WAITS_KEY, json.dumps(document))
    client.delete(WAITS_VERSION_KEY)
    for _ in range(100):
        cycle_timings_record(client=client, timings_ms={"snapshot": 40.0, "engine": 30.0, "apply": 20.0, "total": 95.0})


def _timed(fn: Any, repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1000.0)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--running", type=int, default=2000)
    parser.add_argument("--pending", type=int, default=10_000)
    parser.add_argument("--events", type=int, default=500_000)
    parser.add_argument("--incidents", type=int, default=20_000)
    parser.add_argument("--samples", type=int, default=500_000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    database_fresh(os.environ["DATABASE_URL"])
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from observability.selectors import fleet_metrics_read

    call_command("migrate", verbosity=0)
    report: dict[str, Any] = {"args": vars(args)}
    report.update(_build(args))
    _pending_reasons()
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE") if connection.vendor == "postgresql" else None
    client = Client()

    def scrape() -> None:
        response = client.get("/metrics", REMOTE_ADDR="127.0.0.1", HTTP_HOST="localhost")
        assert response.status_code == 200
        report["body_bytes"] = len(response.content)
        report["samples"] = sum(
            1 for line in response.content.decode().splitlines() if line and not line.startswith("#")
        )

    # The first scrape settles the whole history into the counters' checkpoints, once.
    first = _timed(fleet_metrics_read, 1)
    fleet = _timed(fleet_metrics_read, args.repeats)
    with CaptureQueriesContext(connection) as context:
        fleet_metrics_read()
    queries = list(context.captured_queries)  # requests reset the connection's query log
    whole = _timed(scrape, args.repeats)
    report.update(
        {
            "database": connection.vendor,
            "queries_per_scrape": len(queries),
            "first_scrape_fleet_figures_ms": round(first[0], 1),
            "fleet_figures_ms": {"median": round(statistics.median(fleet), 1), "max": round(max(fleet), 1)},
            "scrape_ms": {"median": round(statistics.median(whole), 1), "max": round(max(whole), 1)},
            "slowest_queries_ms": sorted(
                ((round(float(q["time"]) * 1000, 1), q["sql"][:90]) for q in queries), reverse=True
            )[:4],
        }
    )
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
